// One @confluentinc/kafka-javascript operation against a broker, through the package's KafkaJS-compatible promisified
// API (require('@confluentinc/kafka-javascript').KafkaJS, the one it recommends), for rdkafka_js_client.py.
//
//   NODE_PATH=<prefix>/node_modules node rdkafka_kafkajs.js < spec.json
//   NODE_PATH=<prefix>/node_modules node rdkafka_kafkajs.js --member '<spec json>'
//
// Protocol and member mode: rdkafka_common.js. What this API lacks, said where it matters: its consumers always
// join a group (no assign(), as in kafkajs), acks and codec are producer settings (send() refuses them), its admin
// has no createPartitions (the package's node-rdkafka-style AdminClient has), and no describeConfigs/alterConfigs.
'use strict'

const { KafkaJS, AdminClient } = require('@confluentinc/kafka-javascript')
const common = require('./rdkafka_common')
const { toB64, fromB64, commonConfig, emit } = common
const { Kafka, CompressionTypes, ErrorCodes, logLevel } = KafkaJS

const CODE_NAMES = Object.fromEntries(Object.entries(ErrorCodes).map(([name, code]) => [code, name.slice(4)]))
const CODECS = { none: CompressionTypes.None, gzip: CompressionTypes.GZIP, snappy: CompressionTypes.SNAPPY,
  lz4: CompressionTypes.LZ4, zstd: CompressionTypes.ZSTD }
// Kafka's names of KafkaJS.ConsumerGroupStates, by their numbers
const STATES = ['Unknown', 'PreparingRebalance', 'CompletingRebalance', 'Stable', 'Dead', 'Empty']

// The package's log on stderr: its default logger writes to stdout.
const logger = {
  level: logLevel.WARN,
  setLogLevel (level) { this.level = level },
  namespace () { return this },
  log (name, message, extra) { process.stderr.write(`${name} ${message} ${JSON.stringify(extra || {})}\n`) },
  error (message, extra) { if (this.level >= logLevel.ERROR) this.log('ERROR', message, extra) },
  warn (message, extra) { if (this.level >= logLevel.WARN) this.log('WARN', message, extra) },
  info (message, extra) { if (this.level >= logLevel.INFO) this.log('INFO', message, extra) },
  debug (message, extra) { if (this.level >= logLevel.DEBUG) this.log('DEBUG', message, extra) }
}

// A Kafka instance: the kafkaJS block in KafkaJS' vocabulary, librdkafka's own settings beside it.
function kafka (bootstrap, role, clientId) {
  const { 'bootstrap.servers': brokers, 'client.id': id, ...rdkafka } = commonConfig(bootstrap, role)
  return new Kafka({ kafkaJS: { brokers: [brokers], clientId: clientId || id, logger, logLevel: logLevel.WARN },
    ...rdkafka })
}

const randomGroup = prefix => `compat-${prefix}-${Math.random().toString(16).slice(2, 10)}`

// A header value as the package takes it. An empty Buffer would be sent as a null value (the addon hands librdkafka
// the Buffer's data pointer, null for an empty one): an empty value goes as the empty string.
const headerValue = b64 => (b64 === '' ? '' : fromB64(b64))

function toMessage (r) {
  const message = { key: fromB64(r.key), value: fromB64(r.value) }
  if (r.headers.length) {
    message.headers = {} // repeated names become an array, sent as consecutive headers
    for (const [name, b64] of r.headers) {
      const value = headerValue(b64)
      message.headers[name] = name in message.headers ? [].concat(message.headers[name], value) : value
    }
  }
  if (r.partition !== null) message.partition = r.partition
  if (r.timestamp !== null) message.timestamp = String(r.timestamp)
  return message
}

function fromHeaders (headers) {
  return Object.entries(headers || {}).flatMap(([name, v]) => [].concat(v).map(item => [name, toB64(item)]))
}

function consumed (partition, m) {
  return { partition, offset: Number(m.offset), key: toB64(m.key), value: toB64(m.value),
    headers: fromHeaders(m.headers), timestamp: Number(m.timestamp) }
}

// [partition, offset] pairs as commitOffsets() takes them
const commitList = (topic, pairs) => pairs.map(([partition, offset]) => ({ topic, partition, offset: String(offset) }))

async function withClient (client, work) {
  await client.connect()
  try {
    return await work(client)
  } finally {
    await client.disconnect()
  }
}

// A plain producer; acks and codec are producer settings in this API. send() reports one base offset per
// partition, not each record's offset.
function produceWith (spec, records, role) {
  const producer = kafka(spec.brokers, role).producer({
    kafkaJS: { acks: spec.acks, compression: CODECS[spec.codec], idempotent: false, allowAutoTopicCreation: true },
    'linger.ms': 5 })
  return withClient(producer, p => p.send({ topic: spec.topic, messages: records.map(toMessage) }))
}

async function produce (spec) {
  return { result: await produceWith(spec, spec.records, 'p') }
}

async function produceMany (spec) {
  await Promise.all(spec.batches.map((records, i) => produceWith(spec, records, `p${i}`)))
  return { producers: spec.batches.length }
}

// An idempotent producer sending every record in one send(); librdkafka cuts them into batches of about `chunk`.
// Retries and reconnects are kept quick: with a proxy cutting connections, this API's retry backoff (300 ms
// growing to 30 s) and librdkafka's reconnect backoff (up to 10 s) would make the run mostly waiting.
async function produceIdempotent (spec) {
  const producer = kafka(spec.brokers, 'i').producer({
    kafkaJS: { idempotent: true, retry: { retries: 1000, initialRetryTime: 50, maxRetryTime: 500 } },
    'batch.num.messages': spec.chunk, 'linger.ms': 5, 'reconnect.backoff.ms': 10, 'reconnect.backoff.max.ms': 100 })
  await withClient(producer, p => p.send({ topic: spec.topic, messages: spec.records.map(toMessage) }))
  return { sent: spec.records.length }
}

// ListOffsets by timestamp through the admin; where no record is that recent the API answers the latest offset
// (as kafkajs does).
function offsetsByTimestamp (spec, timestamp) {
  return withClient(kafka(spec.brokers, 'a').admin(), a => a.fetchTopicOffsetsByTimestamp(spec.topic, timestamp))
}

async function listOffsets (spec) {
  const found = await withClient(kafka(spec.brokers, 'a').admin(), async a => ({
    marks: (await a.fetchTopicOffsets(spec.topic)).find(o => o.partition === spec.partition),
    at: (await a.fetchTopicOffsetsByTimestamp(spec.topic, spec.timestamp)).find(o => o.partition === spec.partition)
  }))
  return { earliest: Number(found.marks.low), latest: Number(found.marks.high), at: Number(found.at.offset) }
}

// Runs `consumer` (connected, subscribed) until `handle(partition, message)` returns true for a message; rejects
// after timeoutMs with `describe()`.
function runUntil (consumer, handle, timeoutMs, describe) {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`${describe()} within ${timeoutMs} ms`)), timeoutMs)
    let done = false
    consumer.run({
      eachMessage: async ({ partition, message }) => {
        if (!done && handle(partition, message)) { done = true; clearTimeout(timer); resolve() }
      }
    }).catch(error => { clearTimeout(timer); reject(error) })
  })
}

// The API has no assign(): a consumer of a group of its own subscribes, and seeks each partition to the start
// asked (a seek before the assignment is applied when the partition is assigned).
async function consume (spec) {
  let seeks = []
  if (spec.start.type === 'offset') seeks = spec.partitions.map(partition => ({ partition, offset: spec.start.value }))
  if (spec.start.type === 'timestamp') seeks = await offsetsByTimestamp(spec, spec.start.value)
  const consumer = kafka(spec.brokers, 'c').consumer({
    kafkaJS: { groupId: randomGroup('c'), fromBeginning: spec.start.type !== 'latest', autoCommit: false,
      maxWaitTimeInMs: spec.fetch_wait_ms || 500, maxBytesPerPartition: 8 * 1024 * 1024 },
    'fetch.max.bytes': 8 * 1024 * 1024, 'receive.message.max.bytes': 12 * 1024 * 1024 })
  const got = []
  await withClient(consumer, async c => {
    await c.subscribe({ topic: spec.topic })
    for (const { partition, offset } of seeks) c.seek({ topic: spec.topic, partition, offset: String(offset) })
    await runUntil(c, (partition, message) => {
      if (spec.partitions.includes(partition)) got.push(consumed(partition, message))
      return got.length >= spec.count
    }, spec.timeout_ms, () => `${got.length} of ${spec.count} records`)
  })
  return { records: got }
}

// spec.clients consumers at once in this process, each reading as consume() does.
async function consumeMany (spec) {
  return { results: await Promise.all(Array.from({ length: spec.clients }, () => consume(spec))) }
}

// The admin's view: describeTopics for each topic (all of them when spec.topics is null), and the brokers as the
// partitions' leader and replica nodes name them (this admin has no describeCluster). A topic the broker does not
// know fails its call and is left out; this admin never lets the broker create one.
async function metadata (spec) {
  return withClient(kafka(spec.brokers, 'md').admin(), async a => {
    const found = []
    for (const asked of spec.topics === null ? [undefined] : spec.topics) {
      try {
        found.push(...await a.fetchTopicMetadata(asked === undefined ? {} : { topics: [asked] }))
      } catch (error) {
        if (error.code !== ErrorCodes.ERR_UNKNOWN_TOPIC_OR_PART) throw error
      }
    }
    const brokers = new Map()
    for (const node of found.flatMap(t => t.partitions.flatMap(p => [p.leaderNode, ...p.replicaNodes]))) {
      if (node) brokers.set(node.id, [node.id, node.host, node.port])
    }
    const topics = Object.fromEntries(found.map(t => [t.name,
      Object.fromEntries(t.partitions.map(p => [p.partitionId, p.leader]))]))
    return { brokers: [...brokers.values()], topics }
  })
}

async function listTopics (spec) {
  return { topics: await withClient(kafka(spec.brokers, 'lt').admin(), a => a.listTopics()) }
}

// Joins spec.group, reads spec.count records from its committed offsets (the earliest without them), commits the
// offset after the last record read of each partition, and leaves.
async function groupConsume (spec) {
  const consumer = kafka(spec.brokers, 'g').consumer({
    kafkaJS: { groupId: spec.group, fromBeginning: true, autoCommit: false, sessionTimeout: 6000,
      heartbeatInterval: 1000, maxWaitTimeInMs: 200 } })
  const got = []
  await withClient(consumer, async c => {
    await c.subscribe({ topic: spec.topic })
    await runUntil(c, (partition, message) => {
      if (got.length < spec.count) got.push(consumed(partition, message)) // beyond: neither kept nor committed
      return got.length >= spec.count
    }, spec.timeout_ms, () => `${got.length} of ${spec.count} records`)
    const next = new Map()
    for (const r of got) next.set(r.partition, Math.max(next.get(r.partition) || 0, r.offset + 1))
    await c.commitOffsets(commitList(spec.topic, [...next]))
  })
  return { records: got }
}

// The group's committed offsets of spec.topic (a partition without one is absent).
async function committed (spec) {
  const found = await withClient(kafka(spec.brokers, 'co').admin(),
    a => a.fetchOffsets({ groupId: spec.group, topics: [spec.topic] }))
  const partitions = found.length ? found[0].partitions : []
  return { offsets: Object.fromEntries(partitions.map(p => [p.partition, Number(p.offset)])) }
}

// Transactional producers following spec.steps (TxnStep of base.py); outcomes 'ok' or 'error:<librdkafka error
// name>'. connect() runs InitProducerId. An abandoned producer is never disconnected.
async function txnScript (spec) {
  const producers = {}
  const outcomes = []
  let abandoned = false
  for (const step of spec.steps) {
    try {
      const producer = producers[step.producer]
      if (step.op === 'init') {
        producers[step.producer] = kafka(spec.brokers, 't').producer({
          kafkaJS: { transactionalId: step.transactional_id, idempotent: true, transactionTimeout: step.timeout_ms },
          'linger.ms': 5 })
        await producers[step.producer].connect()
      } else if (step.op === 'begin') {
        await producer.transaction()
      } else if (step.op === 'send') {
        await producer.send({ topic: spec.topic, messages: step.records.map(toMessage) })
      } else if (step.op === 'commit') {
        await producer.commit()
      } else if (step.op === 'abort') {
        await producer.abort()
      } else if (step.op === 'abandon') {
        abandoned = true
      } else throw new Error(`unknown step ${step.op}`)
      outcomes.push('ok')
    } catch (error) {
      outcomes.push(`error:${CODE_NAMES[error.code] || error.name}`)
    }
  }
  if (!abandoned) {
    for (const producer of Object.values(producers)) await producer.disconnect()
  }
  return { outcomes }
}

// --- admin ----------------------------------------------------------------------------------------------------------

// The admin calls of spec.calls in order, each answering {result} or {error}; a failed call does not stop the next.
// create_partitions goes through the package's node-rdkafka-style AdminClient: the KafkaJS admin has none.
async function admin (spec) {
  const results = []
  await withClient(kafka(spec.brokers, 'a').admin(), async a => {
    for (const c of spec.calls) {
      try {
        results.push({ result: (await adminCall(a, spec, c)) ?? null })
      } catch (error) {
        results.push({ error: common.errorDetail(error, CODE_NAMES) })
      }
    }
  })
  return { results }
}

async function adminCall (a, spec, c) {
  let result
  if (c.call === 'create_topics') {
    result = await a.createTopics({ topics: c.topics.map(t => ({ topic: t.topic, numPartitions: t.partitions,
      replicationFactor: 1,
      configEntries: Object.entries(t.config || {}).map(([name, value]) => ({ name, value })) })) })
  } else if (c.call === 'delete_topics') {
    result = await a.deleteTopics({ topics: c.topics })
  } else if (c.call === 'create_partitions') {
    const client = AdminClient.create(commonConfig(spec.brokers, 'ap'))
    try {
      await new Promise((resolve, reject) => client.createPartitions(c.topic, c.partitions, 15000,
        err => (err ? reject(err) : resolve())))
    } finally {
      client.disconnect()
    }
    result = true
  } else if (c.call === 'list_topics') {
    result = await a.listTopics()
  } else if (c.call === 'describe_topics') {
    const found = await a.fetchTopicMetadata({ topics: c.topics })
    result = found.map(t => ({ name: t.name, partitions: t.partitions.length }))
  } else if (c.call === 'list_groups') {
    const options = c.states ? { matchConsumerGroupStates: c.states.map(s => STATES.indexOf(s)) } : {}
    const found = await a.listGroups(options)
    result = found.groups.map(g => ({ group_id: g.groupId, state: STATES[g.state], protocol_type: g.protocolType }))
  } else if (c.call === 'describe_groups') {
    result = (await a.describeGroups(c.groups)).groups.map(describedGroup)
  } else if (c.call === 'group_offsets') {
    const found = await a.fetchOffsets({ groupId: c.group })
    result = found.flatMap(t => t.partitions.map(p => [t.topic, p.partition, Number(p.offset)]))
  } else if (c.call === 'delete_groups') {
    result = (await a.deleteGroups(c.groups)).map(r => r.groupId)
  } else throw new Error(`unknown admin call ${c.call}`)
  return result
}

function describedGroup (g) {
  if (g.error) return { group_id: g.groupId, error: common.errorDetail(g.error, CODE_NAMES) }
  return {
    group_id: g.groupId, state: STATES[g.state], protocol_type: g.protocolType, protocol: g.protocol,
    members: g.members.map(m => ({ member_id: m.memberId, client_id: m.clientId, host: m.clientHost,
      instance_id: m.groupInstanceId || null,
      assignment: m.assignment.topicPartitions.map(tp => [tp.topic, tp.partition]) }))
  }
}

// --- a group member (member.py's protocol) --------------------------------------------------------------------------

// The rebalance callback reports each change; the package applies it (incrementally for a cooperative group)
// once the callback returns. Without spec.strategy the API's default assignor, roundrobin, is used.
async function member (spec) {
  const assignment = new Set()
  const positions = new Map() // partition -> offset after the last record delivered
  const sorted = () => [...assignment].sort((a, b) => a - b)
  const kafkaJS = { groupId: spec.group, fromBeginning: true, autoCommit: false,
    sessionTimeout: spec.session_timeout_ms, heartbeatInterval: spec.heartbeat_interval_ms,
    rebalanceTimeout: spec.rebalance_timeout_ms, maxWaitTimeInMs: spec.fetch_wait_ms }
  if (spec.strategy) kafkaJS.partitionAssigners = [spec.strategy]
  const settings = {
    kafkaJS,
    rebalance_cb: (err, tps, fns) => {
      const changed = tps.filter(tp => tp.topic === spec.topic).map(tp => tp.partition).sort((a, b) => a - b)
      const cooperative = spec.strategy === 'cooperative-sticky'
      if (err.code === ErrorCodes.ERR__ASSIGN_PARTITIONS) {
        if (!cooperative) assignment.clear()
        changed.forEach(p => assignment.add(p))
        emit('assigned', { partitions: changed, assignment: sorted() })
      } else {
        changed.forEach(p => assignment.delete(p))
        emit(fns.assignmentLost() ? 'lost' : 'revoked', { partitions: changed, assignment: sorted() })
      }
    }
  }
  if (spec.instance_id) settings['group.instance.id'] = spec.instance_id
  const consumer = kafka(spec.bootstrap, 'm', spec.client_id).consumer(settings)
  await consumer.connect()
  await consumer.subscribe({ topic: spec.topic })
  consumer.run({
    eachBatch: async ({ batch }) => {
      const records = batch.messages.map(m => [batch.partition, Number(m.offset), m.value === null ? null : String(m.value)])
      if (!records.length) return
      positions.set(batch.partition, records[records.length - 1][1] + 1)
      emit('records', { records })
    }
  }).catch(common.failMember)
  common.serveMember({
    positions,
    owned: () => assignment,
    commit: offsets => consumer.commitOffsets(commitList(spec.topic, offsets)),
    close: () => consumer.disconnect() // LeaveGroup, except for a static member
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
  admin
}, member, CODE_NAMES)
