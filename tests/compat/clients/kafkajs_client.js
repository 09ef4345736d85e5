// One kafkajs operation against a broker, for tests/compat/clients/kafkajs_client.py.
//
//   NODE_PATH=<dir>/node_modules node kafkajs_client.js < spec.json
//   NODE_PATH=<dir>/node_modules node kafkajs_client.js --member '<spec json>'
//
// The spec is one JSON object: {op, brokers, topic, ...}; see the handlers below. The script prints exactly one
// line `RESULT <json>` on stdout and exits 0, or prints `ERROR <json>` and exits 1. kafkajs' own log lines go to
// stderr so they never mix with the result.
// With --member the script is one long-lived consumer-group member speaking the line protocol of
// tests/compat/clients/member.py: `EVENT <json>` lines out, command lines in (both modes: program_io.js).
// A spec's `security` ({ssl, sasl}: kafkajs' options, see securityOptions) makes its client connect over TLS and/or
// authenticate with SASL.
'use strict'

const { Kafka, logLevel } = require('kafkajs')
const { CODECS, fromB64, toHeaders } = require('./kafkajs_codecs')
const { toB64, emit, failMember, serveMember, main } = require('./program_io')

function stderrLogger () {
  return ({ namespace, level, label, log }) => {
    const { message, ...extra } = log
    process.stderr.write(`${label} [${namespace}] ${message} ${JSON.stringify(extra)}\n`)
  }
}

// The `ssl` and `sasl` options of compatbroker.toolkit.security's kafkajs config: `ssl` is Node's tls.connect
// options (PEM texts) as is; a `sasl` with `oauthBearerToken` becomes kafkajs' oauthBearerProvider handing it out.
function securityOptions (security) {
  if (!security) return {}
  const options = {}
  if (security.ssl) options.ssl = security.ssl
  if (security.sasl) {
    const { oauthBearerToken, ...sasl } = security.sasl
    options.sasl = oauthBearerToken === undefined
      ? sasl
      : { ...sasl, oauthBearerProvider: async () => ({ value: oauthBearerToken }) }
  }
  return options
}

function client (spec, id, clientId) {
  return new Kafka({
    ...securityOptions(spec.security),
    clientId: clientId || `compat-kafkajs-${id}`,
    brokers: [spec.brokers],
    logLevel: logLevel.WARN,
    logCreator: stderrLogger,
    connectionTimeout: 5000,
    requestTimeout: 40000, // above the longest fetch wait the tests ask for
    // Fail fast: the tests want the first error, not a minute of retries.
    retry: { retries: 2, initialRetryTime: 100, maxRetryTime: 1000 }
  })
}

function fromHeaders (headers) {
  const pairs = []
  for (const [name, value] of Object.entries(headers || {})) {
    for (const item of Array.isArray(value) ? value : [value]) pairs.push([name, toB64(item)])
  }
  return pairs
}

function toMessage (record) {
  const message = { key: fromB64(record.key), value: fromB64(record.value), headers: toHeaders(record.headers) }
  if (record.partition !== null) message.partition = record.partition
  if (record.timestamp !== null) message.timestamp = String(record.timestamp)
  return message
}

async function produceWith (kafka, spec, records) {
  const producer = kafka.producer({ idempotent: false, allowAutoTopicCreation: true })
  await producer.connect()
  try {
    return await producer.send({
      topic: spec.topic,
      acks: spec.acks,
      compression: CODECS[spec.codec],
      timeout: 30000,
      messages: records.map(toMessage)
    })
  } finally {
    await producer.disconnect()
  }
}

async function produce (spec) {
  const result = await produceWith(client(spec, 'p'), spec, spec.records)
  return { sent: spec.records.length, result }
}

// An idempotent producer sending the records in order, `chunk` per send() (one Produce request each), each send
// awaited before the next: kafkajs keeps one request in flight for an idempotent producer. Its retries are raised
// from the script's fail-fast two, so that it retries through the connections a fault proxy cuts.
async function produceIdempotent (spec) {
  const producer = client(spec, 'i').producer({ idempotent: true, maxInFlightRequests: 1,
    retry: { retries: 20, initialRetryTime: 50, maxRetryTime: 500 } })
  await producer.connect()
  try {
    for (let start = 0; start < spec.records.length; start += spec.chunk) {
      await producer.send({ topic: spec.topic, acks: -1, messages: spec.records.slice(start, start + spec.chunk).map(toMessage) })
    }
  } finally {
    await producer.disconnect()
  }
  return { sent: spec.records.length }
}

// One Kafka instance (own connections) per batch, all sending at once.
async function produceMany (spec) {
  const results = await Promise.all(spec.batches.map((records, i) => produceWith(client(spec, `p${i}`), spec, records)))
  return { producers: results.length }
}

async function listOffsets (spec) {
  const admin = client(spec, 'a').admin()
  await admin.connect()
  try {
    const offsets = await admin.fetchTopicOffsets(spec.topic)
    const byTime = await admin.fetchTopicOffsetsByTimestamp(spec.topic, spec.timestamp)
    const low = offsets.find(o => o.partition === spec.partition)
    const at = byTime.find(o => o.partition === spec.partition)
    return { earliest: Number(low.low), latest: Number(low.high), at: at ? Number(at.offset) : null }
  } finally {
    await admin.disconnect()
  }
}

// kafkajs has no assign(): every consumer joins a group (FindCoordinator, JoinGroup, SyncGroup, OffsetFetch...),
// then seeks each partition to the requested start.
async function consume (spec) {
  const kafka = client(spec, 'c')
  const consumer = kafka.consumer({
    groupId: `compat-${Math.random().toString(16).slice(2, 10)}`,
    maxWaitTimeInMs: spec.fetch_wait_ms || 500,
    maxBytesPerPartition: 4 * 1024 * 1024,
    retry: { retries: 2, initialRetryTime: 100, maxRetryTime: 1000, restartOnFailure: async () => false }
  })
  const got = []
  let startOffsets = null
  if (spec.start.type === 'timestamp') {
    const admin = kafka.admin()
    await admin.connect()
    const found = await admin.fetchTopicOffsetsByTimestamp(spec.topic, spec.start.value)
    await admin.disconnect()
    startOffsets = found.map(o => ({ partition: o.partition, offset: String(o.offset) }))
  } else if (spec.start.type === 'offset') {
    startOffsets = spec.partitions.map(p => ({ partition: p, offset: String(spec.start.value) }))
  }
  await consumer.connect()
  try {
    return await new Promise((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`${got.length} of ${spec.count} records within ${spec.timeout_ms} ms`)),
        spec.timeout_ms)
      consumer.on(consumer.events.CRASH, event => { clearTimeout(timer); reject(event.payload.error) })
      consumer.subscribe({ topic: spec.topic, fromBeginning: spec.start.type !== 'latest' })
        .then(() => consumer.run({
          autoCommit: false, // nothing to commit: keeps the group APIs needed to the minimum
          eachMessage: async ({ partition, message }) => {
            if (!spec.partitions.includes(partition)) return
            got.push({
              partition,
              offset: Number(message.offset),
              key: toB64(message.key),
              value: toB64(message.value),
              headers: fromHeaders(message.headers),
              timestamp: Number(message.timestamp)
            })
            if (got.length >= spec.count) { clearTimeout(timer); resolve({ records: got }) }
          }
        }))
        .then(() => { for (const position of startOffsets || []) consumer.seek({ topic: spec.topic, ...position }) })
        .catch(error => { clearTimeout(timer); reject(error) })
    })
  } finally {
    await consumer.disconnect()
  }
}

// The cluster and the topics asked about (all when spec.topics is null), partition -> leader; a topic the broker
// calls unknown is left out. kafkajs' admin never lets the broker create a topic; with auto_create a consumer first
// subscribes to the topics, and its Metadata request does (kafkajs' allowAutoTopicCreation defaults to true).
async function metadata (spec) {
  const kafka = client(spec, 'md')
  if (spec.auto_create && spec.topics) {
    const consumer = kafka.consumer({ groupId: `compat-md-${Math.random().toString(16).slice(2, 10)}` })
    await consumer.connect()
    try {
      await consumer.subscribe({ topics: spec.topics })
    } finally {
      await consumer.disconnect()
    }
  }
  const admin = kafka.admin()
  await admin.connect()
  try {
    const cluster = await admin.describeCluster()
    const topics = {}
    for (const asked of spec.topics === null ? [[]] : spec.topics.map(topic => [topic])) { // []: every topic
      try {
        for (const topic of (await admin.fetchTopicMetadata({ topics: asked })).topics) {
          topics[topic.name] = Object.fromEntries(topic.partitions.map(p => [p.partitionId, p.leader]))
        }
      } catch (error) {
        if (error.type !== 'UNKNOWN_TOPIC_OR_PARTITION') throw error
      }
    }
    return { brokers: cluster.brokers.map(b => [b.nodeId, b.host, b.port]), topics }
  } finally {
    await admin.disconnect()
  }
}

async function listTopics (spec) {
  const admin = client(spec, 'lt').admin()
  await admin.connect()
  try {
    return { topics: await admin.listTopics() }
  } finally {
    await admin.disconnect()
  }
}

// Joins spec.group, reads spec.count records from its committed offsets (the earliest without them), commits the
// offset after the last record read of each partition, and leaves.
async function groupConsume (spec) {
  const consumer = client(spec, 'g').consumer({
    groupId: spec.group,
    sessionTimeout: 6000,
    heartbeatInterval: 1000,
    maxWaitTimeInMs: 200,
    retry: { retries: 2, initialRetryTime: 100, maxRetryTime: 1000, restartOnFailure: async () => false }
  })
  const got = []
  await consumer.connect()
  try {
    await new Promise((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`${got.length} of ${spec.count} records within ${spec.timeout_ms} ms`)),
        spec.timeout_ms)
      consumer.on(consumer.events.CRASH, event => { clearTimeout(timer); reject(event.payload.error) })
      consumer.subscribe({ topic: spec.topic, fromBeginning: true })
        .then(() => consumer.run({
          autoCommit: false,
          eachMessage: async ({ partition, message }) => {
            if (got.length >= spec.count) return // fetched beyond what was asked for: neither kept nor committed
            got.push({ partition, offset: Number(message.offset), key: toB64(message.key), value: toB64(message.value) })
            if (got.length === spec.count) { clearTimeout(timer); resolve() }
          }
        }))
        .catch(error => { clearTimeout(timer); reject(error) })
    })
    const next = new Map()
    for (const r of got) next.set(r.partition, Math.max(next.get(r.partition) || 0, r.offset + 1))
    await consumer.commitOffsets([...next].map(([partition, offset]) => ({ topic: spec.topic, partition, offset: String(offset) })))
  } finally {
    await consumer.disconnect()
  }
  return { records: got }
}

// The group's committed offset of each partition of spec.topic (-1: none).
async function committed (spec) {
  const admin = client(spec, 'co').admin()
  await admin.connect()
  try {
    const [found] = await admin.fetchOffsets({ groupId: spec.group, topics: [spec.topic] })
    return { offsets: Object.fromEntries(found.partitions.map(p => [p.partition, Number(p.offset)])) }
  } finally {
    await admin.disconnect()
  }
}

// Transactional producers following spec.steps (see TxnStep in base.py); each step's outcome is 'ok' or
// 'error:<kafkajs error type>'. An abandoned producer is never disconnected: the script exits without a word to the
// broker, its transaction left open.
async function txnScript (spec) {
  const kafka = client(spec, 't')
  const producers = {}
  const transactions = {}
  const outcomes = []
  let abandoned = false
  for (const step of spec.steps) {
    try {
      if (step.op === 'init') {
        producers[step.producer] = kafka.producer({ transactionalId: step.transactional_id, idempotent: true,
          maxInFlightRequests: 1, transactionTimeout: step.timeout_ms,
          retry: { retries: 10, initialRetryTime: 50, maxRetryTime: 500 } })
        await producers[step.producer].connect() // InitProducerId
      } else if (step.op === 'begin') {
        transactions[step.producer] = await producers[step.producer].transaction()
      } else if (step.op === 'send') {
        await transactions[step.producer].send({ topic: spec.topic, acks: -1, messages: step.records.map(toMessage) })
      } else if (step.op === 'commit') {
        await transactions[step.producer].commit()
      } else if (step.op === 'abort') {
        await transactions[step.producer].abort()
      } else if (step.op === 'abandon') {
        abandoned = true
      } else throw new Error(`unknown step ${step.op}`)
      outcomes.push('ok')
    } catch (error) {
      outcomes.push(`error:${error.type || (error.originalError && error.originalError.type) || error.name}`)
    }
  }
  if (!abandoned) {
    for (const producer of Object.values(producers)) await producer.disconnect()
  }
  return { outcomes }
}

// Reads spec.until's partitions from the beginning (read_committed unless spec.read_uncommitted) until the
// consumer's position in each reaches spec.until[partition]. kafkajs has no position(): a batch's lastOffset()
// (control records and aborted records included) is what it resolves and would commit, so position = lastOffset + 1.
async function readToEnd (spec) {
  const consumer = client(spec, 'r').consumer({
    groupId: `compat-rte-${Math.random().toString(16).slice(2, 10)}`,
    readUncommitted: spec.read_uncommitted,
    maxWaitTimeInMs: 100,
    retry: { retries: 2, initialRetryTime: 100, maxRetryTime: 1000, restartOnFailure: async () => false }
  })
  const got = []
  const positions = {}
  const done = () => Object.entries(spec.until).every(([p, end]) => (positions[p] || 0) >= end)
  await consumer.connect()
  try {
    await new Promise((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`positions ${JSON.stringify(positions)} short of ${JSON.stringify(spec.until)} within ${spec.timeout_ms} ms`)),
        spec.timeout_ms)
      consumer.on(consumer.events.CRASH, event => { clearTimeout(timer); reject(event.payload.error) })
      consumer.subscribe({ topic: spec.topic, fromBeginning: true })
        .then(() => consumer.run({
          autoCommit: false,
          eachBatch: async ({ batch }) => {
            for (const m of batch.messages) {
              got.push({ partition: batch.partition, offset: Number(m.offset), key: toB64(m.key), value: toB64(m.value),
                headers: fromHeaders(m.headers), timestamp: Number(m.timestamp) })
            }
            if (!batch.isEmptyIncludingFiltered()) {
              positions[batch.partition] = Math.max(positions[batch.partition] || 0, Number(batch.lastOffset()) + 1)
            }
            if (done()) { clearTimeout(timer); resolve() }
          }
        }))
        .catch(error => { clearTimeout(timer); reject(error) })
    })
  } finally {
    await consumer.disconnect()
  }
  return { records: got, positions }
}

// The admin ACL calls of spec.calls in order over one admin client: {call: 'create', acl: [...]},
// {call: 'describe', filter: {...}}, {call: 'delete', filters: [...]} with kafkajs' fields and Kafka's enum codes.
// Each result is {result} or {error} (see errorDetail); a failed call does not stop the next.
async function acls (spec) {
  const admin = client(spec, 'acl').admin()
  await admin.connect()
  const results = []
  try {
    for (const call of spec.calls) {
      try {
        if (call.call === 'create') results.push({ result: await admin.createAcls({ acl: call.acl }) })
        else if (call.call === 'describe') results.push({ result: await admin.describeAcls(call.filter) })
        else if (call.call === 'delete') results.push({ result: await admin.deleteAcls({ filters: call.filters }) })
        else throw new Error(`unknown ACL call ${call.call}`)
      } catch (error) {
        results.push({ error: errorDetail(error) })
      }
    }
  } finally {
    await admin.disconnect()
  }
  return { results }
}

// An error and what caused it, as far as kafkajs keeps the chain (retriers wrap the error they gave up on).
function errorDetail (error, depth = 0) {
  const detail = {
    name: error.name, message: error.message, type: error.type, code: error.code, retriable: error.retriable
  }
  const cause = error.cause || error.originalError
  if (cause && cause !== error && depth < 5) detail.cause = errorDetail(cause, depth + 1)
  return detail
}

// A group member (see member.py for the protocol). kafkajs' rebalancing is eager and has no revoke callback: a
// REBALANCING event means the member dropped its assignment to rejoin, and GROUP_JOIN carries the new one whole.
async function member (spec) {
  const consumer = client({ brokers: spec.bootstrap }, 'm', spec.client_id).consumer({
    groupId: spec.group,
    sessionTimeout: spec.session_timeout_ms,
    heartbeatInterval: spec.heartbeat_interval_ms,
    rebalanceTimeout: spec.rebalance_timeout_ms,
    maxWaitTimeInMs: spec.fetch_wait_ms,
    retry: { retries: 5, initialRetryTime: 100, maxRetryTime: 1000, restartOnFailure: async () => false }
  })
  let assignment = []
  const positions = new Map() // partition -> offset after the last record delivered
  consumer.on(consumer.events.GROUP_JOIN, ({ payload }) => {
    assignment = [...(payload.memberAssignment[spec.topic] || [])].sort((a, b) => a - b)
    emit('assigned', { partitions: assignment, assignment })
  })
  consumer.on(consumer.events.REBALANCING, () => {
    const dropped = assignment
    assignment = []
    emit('revoked', { partitions: dropped, assignment })
  })
  consumer.on(consumer.events.CRASH, ({ payload }) => failMember(payload.error))
  await consumer.connect()
  await consumer.subscribe({ topic: spec.topic, fromBeginning: true })
  await consumer.run({
    autoCommit: false,
    eachBatch: async ({ batch }) => {
      const records = batch.messages.map(m =>
        [batch.partition, Number(m.offset), m.value === null ? null : m.value.toString('utf8')])
      if (records.length === 0) return
      positions.set(batch.partition, records[records.length - 1][1] + 1)
      emit('records', { records })
    }
  })
  serveMember({
    positions,
    owned: () => new Set(assignment),
    commit: offsets => consumer.commitOffsets(
      offsets.map(([partition, offset]) => ({ topic: spec.topic, partition, offset: String(offset) }))),
    close: () => consumer.disconnect() // LeaveGroup
  })
}

const OPS = {
  produce,
  produce_many: produceMany,
  produce_idempotent: produceIdempotent,
  list_offsets: listOffsets,
  consume,
  metadata,
  list_topics: listTopics,
  group_consume: groupConsume,
  committed,
  txn_script: txnScript,
  read_to_end: readToEnd,
  acls
}

main(OPS, member, errorDetail)
