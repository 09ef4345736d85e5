// One node-rdkafka operation against a broker, for tests/compat/clients/rdkafka_js_client.py: node-rdkafka's own
// callback API (Producer, KafkaConsumer, AdminClient) over the librdkafka it builds from its tarball.
//
//   NODE_PATH=<prefix>/node_modules node rdkafka_callback.js < spec.json
//   NODE_PATH=<prefix>/node_modules node rdkafka_callback.js --member '<spec json>'
//
// RDKAFKA_JS_PACKAGE names the package to load (default node-rdkafka): @confluentinc/kafka-javascript's top-level
// export is the same API. Protocol and member mode: rdkafka_common.js. Consumers read by assign(), without joining
// a group; librdkafka still wants a group.id.
'use strict'

const Kafka = require(process.env.RDKAFKA_JS_PACKAGE || 'node-rdkafka')
const common = require('./rdkafka_common')
const { toB64, fromB64, commonConfig, emit } = common

// librdkafka's error names by code, as confluent-kafka names them: ERR__FENCED -> _FENCED.
const CODE_NAMES = Object.fromEntries(Object.entries(Kafka.CODES.ERRORS).map(([name, code]) => [code, name.slice(4)]))
const ASSIGN = Kafka.CODES.ERRORS.ERR__ASSIGN_PARTITIONS
const BEGINNING = -2 // librdkafka's logical offsets
const END = -1

// A node-style call as a promise.
const call = fn => new Promise((resolve, reject) => fn((err, value) => (err ? reject(err) : resolve(value))))

async function connected (client) {
  await call(cb => client.connect({ timeout: 30000 }, cb))
  return client
}

// Topic-level settings (acks, partitioner, message.timeout.ms) go in the second argument: node-rdkafka installs it
// as librdkafka's default_topic_conf, which replaces what the global settings said for them.
function newProducer (spec, role, settings = {}, topicSettings = {}) {
  return new Kafka.Producer({ ...commonConfig(spec.brokers, role), dr_cb: true, ...settings }, topicSettings)
}

function newConsumer (spec, role, settings = {}) {
  return new Kafka.KafkaConsumer({
    ...commonConfig(spec.brokers, role),
    'group.id': `compat-${Math.random().toString(16).slice(2, 10)}`,
    'enable.auto.commit': false,
    'enable.auto.offset.store': false,
    'fetch.max.bytes': 8 * 1024 * 1024,
    'receive.message.max.bytes': 12 * 1024 * 1024,
    ...settings
  }, { 'auto.offset.reset': 'earliest' })
}

// Headers as node-rdkafka takes them: a list of one-entry objects (repeated names keep their order).
const toHeaders = pairs => (pairs.length ? pairs.map(([name, value]) => ({ [name]: fromB64(value) })) : undefined)
const fromHeaders = headers => (headers || []).flatMap(h => Object.entries(h).map(([name, v]) => [name, toB64(v)]))

function consumed (m) {
  return { partition: m.partition, offset: m.offset, key: toB64(m.key), value: toB64(m.value),
    headers: fromHeaders(m.headers), timestamp: m.timestamp }
}

// Sends `records` and resolves with each one's delivery report once all are in (a failed one rejects).
async function send (producer, topic, records) {
  const reports = new Array(records.length)
  let pending = records.length
  const delivered = new Promise((resolve, reject) => {
    const onReport = (err, report) => {
      if (err) reject(err)
      reports[report.opaque] = [report.partition, report.offset]
      if (--pending === 0) {
        producer.removeListener('delivery-report', onReport)
        resolve(reports)
      }
    }
    producer.on('delivery-report', onReport)
  })
  producer.setPollInterval(10)
  records.forEach((r, i) => producer.produce(topic, r.partition, fromB64(r.value), fromB64(r.key), r.timestamp, i,
    toHeaders(r.headers)))
  return records.length ? delivered : []
}

// A plain producer (no idempotence) with murmur2_random, the Java client's partitioner.
async function produceWith (spec, records, role) {
  const producer = await connected(newProducer(spec, role, {
    'compression.codec': spec.codec, 'enable.idempotence': false, 'linger.ms': 5 },
  { acks: spec.acks, partitioner: 'murmur2_random', 'message.timeout.ms': 60000 }))
  try {
    return await send(producer, spec.topic, records)
  } finally {
    await call(cb => producer.disconnect(10000, cb))
  }
}

async function produce (spec) {
  return { reports: await produceWith(spec, spec.records, 'p') }
}

async function produceMany (spec) {
  await Promise.all(spec.batches.map((records, i) => produceWith(spec, records, `p${i}`)))
  return { producers: spec.batches.length }
}

// An idempotent producer; about `chunk` records to a batch. Reconnects are kept quick: with a proxy cutting
// connections, librdkafka's default backoff (up to 10 s) would make the run mostly waiting.
async function produceIdempotent (spec) {
  const producer = await connected(newProducer(spec, 'i', {
    'enable.idempotence': true, 'batch.num.messages': spec.chunk, 'linger.ms': 5,
    'reconnect.backoff.ms': 10, 'reconnect.backoff.max.ms': 100 }, { 'message.timeout.ms': 240000 }))
  try {
    await send(producer, spec.topic, spec.records)
  } finally {
    await call(cb => producer.disconnect(10000, cb))
  }
  return { sent: spec.records.length }
}

// Where each partition starts: librdkafka's logical offsets, or ListOffsets by timestamp (none there: the end).
async function starts (consumer, spec) {
  const at = offset => spec.partitions.map(partition => ({ topic: spec.topic, partition, offset }))
  if (spec.start.type === 'earliest') return at(BEGINNING)
  if (spec.start.type === 'latest') return at(END)
  if (spec.start.type === 'offset') return at(spec.start.value)
  const found = await call(cb => consumer.offsetsForTimes(at(spec.start.value), 15000, cb))
  return found.map(tp => ({ topic: tp.topic, partition: tp.partition, offset: tp.offset >= 0 ? tp.offset : END }))
}

// consume() batches until `done()` says so; rejects at the deadline.
async function readUntil (consumer, got, done, timeoutMs, describe) {
  const deadline = Date.now() + timeoutMs
  consumer.setDefaultConsumeTimeout(200)
  while (!done()) {
    if (Date.now() > deadline) throw new Error(`${describe()} within ${timeoutMs} ms`)
    for (const m of await call(cb => consumer.consume(1000, cb))) got.push(m)
  }
}

async function consume (spec) {
  const settings = spec.fetch_wait_ms ? { 'fetch.wait.max.ms': spec.fetch_wait_ms } : {}
  const consumer = await connected(newConsumer(spec, 'c', settings))
  const got = []
  try {
    consumer.assign(await starts(consumer, spec))
    await readUntil(consumer, got, () => got.length >= spec.count, spec.timeout_ms,
      () => `${got.length} of ${spec.count} records`)
  } finally {
    await call(cb => consumer.disconnect(cb))
  }
  return { records: got.slice(0, spec.count).map(consumed) }
}

// spec.clients consumers at once in this process, each reading as consume() does.
async function consumeMany (spec) {
  return { results: await Promise.all(Array.from({ length: spec.clients }, () => consume(spec))) }
}

async function listOffsets (spec) {
  const consumer = await connected(newConsumer(spec, 'l'))
  try {
    const marks = await call(cb => consumer.queryWatermarkOffsets(spec.topic, spec.partition, 15000, cb))
    const [found] = await call(cb => consumer.offsetsForTimes(
      [{ topic: spec.topic, partition: spec.partition, offset: spec.timestamp }], 15000, cb))
    return { earliest: marks.lowOffset, latest: marks.highOffset, at: found.offset }
  } finally {
    await call(cb => consumer.disconnect(cb))
  }
}

// getMetadata() names one topic, or all; a producer lets the broker create a topic when allow.auto.create.topics
// says so. node-rdkafka drops each topic's error code: a topic the broker does not know comes back with no
// partitions (an existing topic has at least one), and is left out. A topic the broker has just created for the
// request comes back so too (LEADER_NOT_AVAILABLE), so with auto_create a topic is asked about again, for up to
// 10 s, until it has partitions.
async function metadata (spec) {
  const producer = await connected(newProducer(spec, 'md', { 'allow.auto.create.topics': spec.auto_create }))
  const brokers = new Map()
  const topics = {}
  const ask = async options => {
    const answer = await call(cb => producer.getMetadata({ ...options, timeout: 15000 }, cb))
    for (const b of answer.brokers) brokers.set(b.id, [b.id, b.host, b.port])
    for (const t of answer.topics) {
      if (t.partitions.length) topics[t.name] = Object.fromEntries(t.partitions.map(p => [p.id, p.leader]))
    }
  }
  try {
    if (spec.topics === null) await ask({ allTopics: true })
    for (const topic of spec.topics || []) {
      const deadline = Date.now() + 10000
      do await ask({ topic, allTopics: false })
      while (spec.auto_create && !topics[topic] && Date.now() < deadline)
    }
    return { brokers: [...brokers.values()], topics }
  } finally {
    await call(cb => producer.disconnect(5000, cb))
  }
}

async function listTopics (spec) {
  return { topics: Object.keys((await metadata({ ...spec, topics: null, auto_create: false })).topics) }
}

// Joins spec.group, reads spec.count records from its committed offsets (the earliest without them), commits the
// offset after the last record read of each partition, and leaves.
async function groupConsume (spec) {
  const consumer = await connected(newConsumer(spec, 'g', {
    'group.id': spec.group, 'session.timeout.ms': 6000, 'heartbeat.interval.ms': 1000, 'fetch.wait.max.ms': 200 }))
  const got = []
  try {
    consumer.subscribe([spec.topic])
    await readUntil(consumer, got, () => got.length >= spec.count, spec.timeout_ms,
      () => `${got.length} of ${spec.count} records`)
    const next = new Map()
    for (const m of got.slice(0, spec.count)) next.set(m.partition, Math.max(next.get(m.partition) || 0, m.offset + 1))
    consumer.commitSync([...next].map(([partition, offset]) => ({ topic: spec.topic, partition, offset })))
  } finally {
    await call(cb => consumer.disconnect(cb))
  }
  return { records: got.slice(0, spec.count).map(consumed) }
}

// The group's committed offset of each partition asked (librdkafka's -1001, OFFSET_INVALID: none).
async function committed (spec) {
  const consumer = await connected(newConsumer(spec, 'co', { 'group.id': spec.group }))
  try {
    const found = await call(cb => consumer.committed(
      spec.partitions.map(partition => ({ topic: spec.topic, partition })), 15000, cb))
    return { offsets: Object.fromEntries(found.map(tp => [tp.partition, tp.offset])) }
  } finally {
    await call(cb => consumer.disconnect(cb))
  }
}

// Transactional producers following spec.steps (TxnStep of base.py); each outcome is 'ok' or 'error:<librdkafka
// error name>'. An abandoned producer is never disconnected: the process exits with its transaction open.
async function txnScript (spec) {
  const producers = {}
  const outcomes = []
  let abandoned = false
  for (const step of spec.steps) {
    try {
      const producer = producers[step.producer]
      if (step.op === 'init') {
        producers[step.producer] = await connected(newProducer(spec, 't', {
          'transactional.id': step.transactional_id, 'transaction.timeout.ms': step.timeout_ms, 'linger.ms': 5 }))
        await call(cb => producers[step.producer].initTransactions(30000, cb))
      } else if (step.op === 'begin') {
        await call(cb => producer.beginTransaction(cb))
      } else if (step.op === 'send') {
        await send(producer, spec.topic, step.records)
      } else if (step.op === 'commit') {
        await call(cb => producer.commitTransaction(30000, cb))
      } else if (step.op === 'abort') {
        await call(cb => producer.abortTransaction(30000, cb))
      } else if (step.op === 'abandon') {
        abandoned = true
      } else throw new Error(`unknown step ${step.op}`)
      outcomes.push('ok')
    } catch (error) {
      outcomes.push(`error:${CODE_NAMES[error.code] || error.name}`)
    }
  }
  if (!abandoned) {
    for (const producer of Object.values(producers)) await call(cb => producer.disconnect(5000, cb))
  }
  return { outcomes }
}

// Reads spec.until's partitions from the beginning until the consumer's position in each reaches
// spec.until[partition] (read_committed unless spec.read_uncommitted).
async function readToEnd (spec) {
  const consumer = await connected(newConsumer(spec, 'r', {
    'isolation.level': spec.read_uncommitted ? 'read_uncommitted' : 'read_committed', 'fetch.wait.max.ms': 100 }))
  const got = []
  const until = Object.entries(spec.until).map(([p, end]) => [Number(p), end])
  const asked = until.map(([partition]) => ({ topic: spec.topic, partition }))
  const positions = () => Object.fromEntries(consumer.position(asked).map(tp => [tp.partition, tp.offset]))
  try {
    consumer.assign(until.map(([partition]) => ({ topic: spec.topic, partition, offset: BEGINNING })))
    await readUntil(consumer, got, () => until.every(([p, end]) => positions()[p] >= end), spec.timeout_ms,
      () => `positions ${JSON.stringify(positions())} short of ${JSON.stringify(spec.until)}`)
    return { records: got.map(consumed), positions: positions() }
  } finally {
    await call(cb => consumer.disconnect(cb))
  }
}

// node-rdkafka's AdminClient: createTopic, createPartitions, deleteTopic (all it has). Each call's answer is
// {ok: true} or {error: {code, kafka, message}}; a failed call does not stop the next.
async function admin (spec) {
  const client = Kafka.AdminClient.create(commonConfig(spec.brokers, 'a'))
  const results = []
  try {
    for (const c of spec.calls) {
      try {
        if (c.call === 'create_topic') {
          await call(cb => client.createTopic({ topic: c.topic, num_partitions: c.partitions,
            replication_factor: 1, config: c.config || {} }, 15000, cb))
        } else if (c.call === 'create_partitions') {
          await call(cb => client.createPartitions(c.topic, c.partitions, 15000, cb))
        } else if (c.call === 'delete_topic') {
          await call(cb => client.deleteTopic(c.topic, 15000, cb))
        } else throw new Error(`unknown admin call ${c.call}`)
        results.push({ ok: true })
      } catch (error) {
        results.push({ error: common.errorDetail(error, CODE_NAMES) })
      }
    }
  } finally {
    client.disconnect()
  }
  return { results }
}

// A group member (member.py's protocol). The rebalance callback applies each change itself, incrementally when
// the group is cooperative, and reports it; commands run between consume() calls.
async function member (spec) {
  const cooperative = spec.strategy === 'cooperative-sticky'
  const assignment = new Set()
  const positions = new Map() // partition -> offset after the last record delivered
  const ours = tps => tps.filter(tp => tp.topic === spec.topic).map(tp => tp.partition).sort((a, b) => a - b)
  const settings = {
    'group.id': spec.group, 'client.id': spec.client_id, 'session.timeout.ms': spec.session_timeout_ms,
    'heartbeat.interval.ms': spec.heartbeat_interval_ms, 'max.poll.interval.ms': spec.rebalance_timeout_ms,
    'fetch.wait.max.ms': spec.fetch_wait_ms,
    rebalance_cb (err, tps) {
      const changed = ours(tps)
      if (err.code === ASSIGN) {
        if (cooperative) this.incrementalAssign(tps); else this.assign(tps)
        if (!cooperative) assignment.clear()
        changed.forEach(p => assignment.add(p))
        emit('assigned', { partitions: changed, assignment: [...assignment].sort((a, b) => a - b) })
      } else {
        if (cooperative) this.incrementalUnassign(tps); else this.unassign()
        changed.forEach(p => assignment.delete(p))
        emit('revoked', { partitions: changed, assignment: [...assignment].sort((a, b) => a - b) })
      }
    }
  }
  if (spec.strategy) settings['partition.assignment.strategy'] = spec.strategy
  if (spec.instance_id) settings['group.instance.id'] = spec.instance_id
  const consumer = await connected(newConsumer({ brokers: spec.bootstrap }, 'm', settings))
  consumer.setDefaultConsumeTimeout(200)
  consumer.subscribe([spec.topic])
  let closing = false
  const poll = async () => {
    while (!closing) {
      const batch = await call(cb => consumer.consume(500, cb))
      if (closing || !batch.length) continue
      for (const m of batch) positions.set(m.partition, m.offset + 1)
      emit('records', { records: batch.map(m => [m.partition, m.offset, m.value === null ? null : String(m.value)]) })
    }
  }
  const polling = poll().catch(common.failMember)
  common.serveMember({
    positions,
    owned: () => assignment,
    commit: async offsets =>
      consumer.commitSync(offsets.map(([partition, offset]) => ({ topic: spec.topic, partition, offset }))),
    close: async () => {
      closing = true
      await polling
      await call(cb => consumer.disconnect(cb)) // LeaveGroup, except for a static member
    }
  })
}

common.main({
  produce,
  produce_many: produceMany,
  produce_idempotent: produceIdempotent,
  consume,
  consume_many: consumeMany,
  list_offsets: listOffsets,
  metadata,
  list_topics: listTopics,
  group_consume: groupConsume,
  committed,
  txn_script: txnScript,
  read_to_end: readToEnd,
  admin
}, member, CODE_NAMES)
