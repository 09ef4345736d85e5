// kafkajs against a cluster, for tests/compat/test_cluster_kafkajs.py and test_cluster_admin_kafkajs.py.
//
//   NODE_PATH=<dir>/node_modules node cluster_kafkajs.js '<spec json>'
//
// spec.op "workload": one long-lived process holding an idempotent producer (acks=all, one request in flight) and
// a group consumer, speaking the line protocol of tests/compat/clients/cluster_workload.py:
//   stdin:  {"op": "produce", "from": a, "to": b}  sends the numbered records a..b-1 (record n has the value "n"
//           and goes to partition n % spec.partitions), spec.chunk per send(), each send awaited before the next;
//           {"op": "close"} disconnects both (end of stdin too).
//   stdout: EVENT {"type": "acked", "numbers": [...]} after each send the broker acknowledged; "send_failed" with
//           the numbers and the error when a send failed for good; "produced" {"to": b} when a produce command is
//           done; "records" [[partition, offset, value]...] as the consumer got them; "committed"; "joined" (the
//           group's generation and assignment); "crash" (the consumer crashed and kafkajs restarts it); "closed".
// Other ops run once and print `RESULT <json>` or `ERROR <json>` (program_io.js): "produce" (records to one
// partition with acks=all and the given retries) and "admin" (a list of admin calls, see adminCall).
// Metadata is refreshed every second (metadataMaxAge), so that moved leaders are found quickly; kafkajs also
// refreshes on NOT_LEADER_OR_FOLLOWER / NOT_COORDINATOR itself.
'use strict'

const { Kafka, logLevel } = require('kafkajs')
const { emit, exitAfterOutput, failMember, serveCommands, answer } = require('./program_io')

const METADATA_MAX_AGE_MS = 1000

function stderrLogger () {
  return ({ namespace, level, label, log }) => {
    const { message, ...extra } = log
    process.stderr.write(`${new Date().toISOString()} ${label} [${namespace}] ${message} ${JSON.stringify(extra)}\n`)
  }
}

function kafkaFor (spec, clientId) {
  return new Kafka({
    clientId,
    brokers: spec.brokers.split(','),
    logLevel: logLevel.WARN,
    logCreator: stderrLogger,
    connectionTimeout: 3000,
    requestTimeout: 30000,
    // generous for finding a live node among the seeds (some may be stopped); a producer's own retries are its own
    retry: { retries: 30, initialRetryTime: 100, maxRetryTime: 1000 }
  })
}

// The error's kafkajs type, looking through the wrappers kafkajs puts around the broker's error.
function errorType (error) {
  for (let e = error; e; e = e.originalError || (e.cause !== e ? e.cause : null)) {
    if (e.type) return e.type
  }
  return error.name
}

// An aggregate error (createTopics' KafkaJSAggregateError) carries the broker's errors in `errors`.
function describeError (error) {
  const described = { name: error.name, message: error.message, type: errorType(error) }
  if (Array.isArray(error.errors)) described.errors = error.errors.map(describeError)
  return described
}

async function workload (spec) {
  const kafka = kafkaFor(spec, `cluster-kafkajs-${spec.group}`)
  const producer = kafka.producer({ idempotent: true, maxInFlightRequests: 1, metadataMaxAge: METADATA_MAX_AGE_MS })
  const consumer = kafka.consumer({
    groupId: spec.group,
    sessionTimeout: 10000,
    heartbeatInterval: 500,
    maxWaitTimeInMs: 200,
    metadataMaxAge: METADATA_MAX_AGE_MS
  })
  consumer.on(consumer.events.GROUP_JOIN, ({ payload }) =>
    emit('joined', { member: payload.memberId, assignment: payload.memberAssignment[spec.topic] || [] }))
  consumer.on(consumer.events.CRASH, ({ payload }) =>
    emit('crash', { error: describeError(payload.error), restart: payload.restart }))
  consumer.on(consumer.events.COMMIT_OFFSETS, ({ payload }) => emit('committed', { topics: payload.topics }))
  await producer.connect()
  await consumer.connect()
  await consumer.subscribe({ topic: spec.topic, fromBeginning: true })
  await consumer.run({
    autoCommit: true,
    autoCommitThreshold: 1, // commit after every batch: the group's position moves with what it read
    eachBatch: async ({ batch }) => {
      const records = batch.messages.map(m => [batch.partition, Number(m.offset), m.value.toString('utf8')])
      if (records.length) emit('records', { records })
    }
  })
  emit('started', {})

  const produceRange = async (from, to) => {
    for (let start = from; start < to; start += spec.chunk) {
      const numbers = []
      for (let n = start; n < Math.min(start + spec.chunk, to); n++) numbers.push(n)
      // one send per partition keeps each send a single-partition request
      for (let p = 0; p < spec.partitions; p++) {
        const mine = numbers.filter(n => n % spec.partitions === p)
        if (!mine.length) continue
        try {
          await producer.send({ topic: spec.topic, acks: -1, timeout: 30000,
            messages: mine.map(n => ({ value: String(n), partition: p })) })
          emit('acked', { numbers: mine })
        } catch (error) {
          emit('send_failed', { numbers: mine, error: describeError(error) })
        }
      }
    }
    emit('produced', { to })
  }

  let closing = false
  const close = async () => {
    if (closing) return
    closing = true
    await consumer.disconnect()
    await producer.disconnect()
    emit('closed', {})
    exitAfterOutput(0)
  }
  serveCommands(async command => {
    if (command.op === 'produce') await produceRange(command.from, command.to)
    else if (command.op === 'close') await close()
    else throw new Error(`unknown command ${JSON.stringify(command)}`)
  })
}

// Records to one partition with acks=all and spec.retries retries: {"ok": true} or the error.
async function produceOnce (spec) {
  const producer = kafkaFor(spec, 'cluster-kafkajs-p').producer({ idempotent: spec.idempotent || false,
    maxInFlightRequests: spec.idempotent ? 1 : undefined, metadataMaxAge: METADATA_MAX_AGE_MS,
    retry: { retries: spec.retries, initialRetryTime: 100, maxRetryTime: 1000 } })
  await producer.connect()
  try {
    const answer = await producer.send({ topic: spec.topic, acks: -1, timeout: spec.timeout_ms || 10000,
      messages: spec.values.map(value => ({ value, partition: spec.partition })) })
    return { ok: true, answer }
  } catch (error) {
    return { ok: false, error: describeError(error) }
  } finally {
    await producer.disconnect()
  }
}

// The admin calls in order; each result is {"result": ...} or {"error": {name, message, type}}.
async function adminCalls (spec) {
  const admin = kafkaFor(spec, 'cluster-kafkajs-admin').admin()
  await admin.connect()
  const results = []
  try {
    for (const call of spec.calls) {
      try {
        results.push({ result: (await adminCall(admin, call)) ?? null }) // undefined would drop the key
      } catch (error) {
        results.push({ error: describeError(error) })
      }
    }
  } finally {
    await admin.disconnect()
  }
  return { results }
}

async function adminCall (admin, call) {
  switch (call.call) {
    case 'create_topics':
      return await admin.createTopics({ topics: call.topics, waitForLeaders: true, timeout: 30000 })
    case 'fetch_topic_metadata':
      return await admin.fetchTopicMetadata({ topics: call.topics })
    case 'describe_cluster':
      return await admin.describeCluster()
    case 'alter_partition_reassignments':
      return await admin.alterPartitionReassignments({ topics: call.topics, timeout: 30000 })
    case 'list_partition_reassignments':
      return await admin.listPartitionReassignments({ topics: call.topics || null, timeout: 30000 })
    case 'fetch_topic_offsets':
      return await admin.fetchTopicOffsets(call.topic)
  }
  throw new Error(`unknown admin call ${call.call}`)
}

const ONE_SHOT = { produce: produceOnce, admin: adminCalls }

async function main () {
  const spec = JSON.parse(process.argv[2])
  if (spec.op === 'workload') {
    try {
      await workload(spec)
    } catch (error) {
      failMember(error)
    }
    return
  }
  await answer(ONE_SHOT, spec, describeError)
}

main()
