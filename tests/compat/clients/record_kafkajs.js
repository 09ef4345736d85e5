// Runs one kafkajs flow against a broker address, for tests/compat/record_client_frames.py.
//
//   NODE_PATH=/tmp/kafkajs/node_modules node record_kafkajs.js <flow> <host:port> <spec.json>
//
// The Python recorder owns the flow definitions (topics, codecs, records); this script only turns
// a spec into kafkajs calls, so the records sent are identical across clients. It prints one JSON
// line with what it observed and exits non-zero when the flow did not complete.
'use strict'

const fs = require('fs')
const { Kafka, ConfigResourceTypes, logLevel } = require('kafkajs')
// The recorder keeps repeated header names adjacent, so the wire order equals the spec order.
const { CODECS, fromB64, toHeaders } = require('./kafkajs_codecs')

function toMessage (record) {
  return {
    partition: 0,
    key: fromB64(record.key),
    value: fromB64(record.value),
    headers: toHeaders(record.headers),
    timestamp: String(record.timestamp)
  }
}

async function produce (kafka, spec) {
  const producer = kafka.producer({ idempotent: spec.idempotent, maxInFlightRequests: spec.idempotent ? 1 : undefined })
  await producer.connect()
  try {
    const result = await producer.send({
      topic: spec.topic,
      acks: spec.acks,
      compression: CODECS[spec.codec],
      messages: spec.records.map(toMessage)
    })
    return { sent: spec.records.length, result }
  } finally {
    await producer.disconnect()
  }
}

async function metadata (kafka, spec) {
  const admin = kafka.admin()
  await admin.connect()
  try {
    const topics = await admin.listTopics()
    const described = await admin.fetchTopicMetadata({ topics: [spec.topic] })
    return { topics: topics.length, partitions: described.topics[0].partitions.length }
  } finally {
    await admin.disconnect()
  }
}

// Consumes spec.expected records in a group (kafkajs has no assign()), then optionally waits for
// a few heartbeats so the Heartbeat request is on record, commits, reads the commit back, and
// leaves the group.
async function consumeInGroup (kafka, spec) {
  const consumer = kafka.consumer({
    groupId: spec.group,
    heartbeatInterval: 300,
    sessionTimeout: 10000,
    maxWaitTimeInMs: 300,
    retry: { retries: 2 }
  })
  let heartbeats = 0
  let onHeartbeat = () => {}
  consumer.on(consumer.events.HEARTBEAT, () => { heartbeats += 1; onHeartbeat() })
  await consumer.connect()
  const consumed = []
  let onDone
  const done = new Promise(resolve => { onDone = resolve })
  await consumer.subscribe({ topics: [spec.consume_topic], fromBeginning: true })
  await consumer.run({
    autoCommit: false,
    eachMessage: async ({ message }) => {
      consumed.push(message.offset)
      if (consumed.length === spec.expected) onDone()
    }
  })
  await withTimeout(done, 30000, 'consume')
  if (spec.heartbeats > 0) {
    await withTimeout(new Promise(resolve => {
      onHeartbeat = () => { if (heartbeats >= spec.heartbeats) resolve() }
      onHeartbeat()
    }), 15000, 'heartbeats')
  }
  if (spec.commit) {
    const next = String(Number(consumed[consumed.length - 1]) + 1)
    await consumer.commitOffsets([{ topic: spec.consume_topic, partition: 0, offset: next }])
  }
  let committed = null
  if (spec.fetch_committed) {
    const admin = kafka.admin()
    await admin.connect()
    try {
      committed = await admin.fetchOffsets({ groupId: spec.group, topics: [spec.consume_topic] })
    } finally {
      await admin.disconnect()
    }
  }
  await consumer.disconnect()
  return { consumed: consumed.length, heartbeats, committed }
}

// Admin requests the mock lacks are advertised by the proxy and never answered, so each
// call is expected to time out; the frame it sent is what we are after.
async function adminCalls (kafka, spec) {
  const admin = kafka.admin({ retry: { retries: 0 } })
  await admin.connect()
  const outcome = {}
  const calls = {
    createTopics: () => admin.createTopics({ topics: [{ topic: spec.create_topic, numPartitions: 1 }], timeout: 1000 }),
    describeConfigs: () => admin.describeConfigs({
      includeSynonyms: false,
      resources: [{ type: ConfigResourceTypes.TOPIC, name: spec.topic }]
    }),
    listGroups: () => admin.listGroups(),
    describeGroups: () => admin.describeGroups([spec.group]),
    deleteTopics: () => admin.deleteTopics({ topics: [spec.create_topic], timeout: 1000 })
  }
  try {
    for (const [name, call] of Object.entries(calls)) {
      try {
        await call()
        outcome[name] = 'ok'
      } catch (e) {
        outcome[name] = e.name
      }
    }
  } finally {
    await admin.disconnect()
  }
  return outcome
}

function withTimeout (promise, ms, what) {
  let timer
  const timeout = new Promise((resolve, reject) => {
    timer = setTimeout(() => reject(new Error(what + ' timed out after ' + ms + ' ms')), ms)
  })
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer))
}

const FLOWS = { produce, metadata, consume: consumeInGroup, group: consumeInGroup, admin: adminCalls }

async function main () {
  const [flow, broker, specPath] = process.argv.slice(2)
  const spec = JSON.parse(fs.readFileSync(specPath, 'utf8'))
  const kafka = new Kafka({
    clientId: spec.client_id || 'kafkajs',
    brokers: [broker],
    logLevel: logLevel.NOTHING,
    requestTimeout: spec.request_timeout_ms || 5000,
    retry: { retries: 2 }
  })
  const result = await FLOWS[flow.split('-')[0]](kafka, spec)
  process.stdout.write(JSON.stringify({ flow, ok: true, result }) + '\n')
}

main().then(
  () => process.exit(0),
  e => {
    process.stdout.write(JSON.stringify({ ok: false, error: String(e && e.stack ? e.stack : e) }) + '\n')
    process.exit(1)
  }
)
