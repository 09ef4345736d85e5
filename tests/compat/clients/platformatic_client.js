// One @platformatic/kafka operation against a broker, for tests/compat/clients/platformatic_client.py.
//
//   NODE_PATH=<prefix>/node_modules node platformatic_client.js < spec.json
//   NODE_PATH=<prefix>/node_modules node platformatic_client.js --member '<spec json>'
//
// The spec is one JSON object: {op, brokers, topic, ...}; see the handlers below. The script prints exactly one
// line `RESULT <json>` on stdout and exits 0, or `ERROR <json>` (see errorDetail) and exits 1; the library's own
// warnings go to stderr. With --member the script is one long-lived consumer-group member speaking the line protocol
// of tests/compat/clients/member.py: `EVENT <json>` lines out, command lines in (both modes: program_io.js).
// The package is an ES module: require() loads it (Node >= 20.19 loads ES modules synchronously) so that NODE_PATH
// finds it, as it does not for `import`.
'use strict'

const {
  Admin, Consumer, Producer, ConfigResourceTypes, FetchIsolationLevels, IncrementalAlterConfigOperationTypes,
  MessagesStreamModes, compatibilityPartitioner
} = require('@platformatic/kafka')

const { toB64, emit, exitAfterOutput, serveMember, main } = require('./program_io')
const fromB64 = s => (s === null ? undefined : Buffer.from(s, 'base64'))
const randomId = prefix => `${prefix}-${Math.random().toString(16).slice(2, 10)}`

// Options every client of a spec shares. Two retries a short delay apart: the tests want the first error, not
// minutes of retries.
function clientOptions (spec, id, clientId) {
  return {
    clientId: clientId || `compat-platformatic-${id}`,
    bootstrapBrokers: [spec.brokers],
    connectTimeout: 5000,
    requestTimeout: 40000, // above the longest fetch wait the tests ask for
    retries: 2,
    retryDelay: 200
  }
}

// A record as the producer takes it: Buffers throughout (no serialisers), headers as a Map keyed by distinct Buffer
// objects, so that a repeated header name stays two headers, in order.
function toMessage (topic, record) {
  const message = { topic, key: fromB64(record.key), value: fromB64(record.value) }
  if (record.headers.length) {
    message.headers = new Map(record.headers.map(([name, value]) => [Buffer.from(name), fromB64(value)]))
  }
  if (record.partition !== null) message.partition = record.partition
  if (record.timestamp !== null) message.timestamp = BigInt(record.timestamp)
  return message
}

function fromMessage (message) {
  return {
    partition: message.partition,
    offset: Number(message.offset),
    key: toB64(message.key),
    value: toB64(message.value),
    headers: [...message.headers].map(([name, value]) => [Buffer.from(name).toString('utf8'), toB64(value)]),
    timestamp: Number(message.timestamp)
  }
}

// Keyed records go where Kafka's Java client puts them: the library's default partitioner normalises murmur2
// differently, and documents compatibilityPartitioner for Java/kafkajs placement.
function newProducer (spec, id, extra = {}) {
  return new Producer({ ...clientOptions(spec, id), partitioner: compatibilityPartitioner, ...extra })
}

async function produceWith (producer, spec, records) {
  try {
    const sent = await producer.send({
      messages: records.map(record => toMessage(spec.topic, record)),
      acks: spec.acks,
      compression: spec.codec === 'none' ? undefined : spec.codec,
      autocreateTopics: true
    })
    return (sent.offsets || []).map(o => [o.partition, Number(o.offset)])
  } finally {
    await producer.close()
  }
}

// One send() of every record: one Produce request per leader, each partition's records in one batch. Returns the
// base offset of each partition's batch.
async function produce (spec) {
  return { bases: await produceWith(newProducer(spec, 'p'), spec, spec.records) }
}

// One producer (own connections) per batch, all sending at once.
async function produceMany (spec) {
  const results = await Promise.all(
    spec.batches.map((records, i) => produceWith(newProducer(spec, `p${i}`), spec, records)))
  return { producers: results.length }
}

// The idempotent producer (InitProducerId, then sequence numbers), `chunk` records to a send(), each send awaited
// before the next; it retries through failed requests and cut connections (its retries are unbounded by default
// when idempotent; the delay is kept short).
async function produceIdempotent (spec) {
  const producer = newProducer(spec, 'i', { idempotent: true, retries: true, retryDelay: 100 })
  try {
    for (let start = 0; start < spec.records.length; start += spec.chunk) {
      await producer.send({
        messages: spec.records.slice(start, start + spec.chunk).map(r => toMessage(spec.topic, r)),
        autocreateTopics: true
      })
    }
  } finally {
    await producer.close()
  }
  return { sent: spec.records.length }
}

async function withAdmin (spec, id, work) {
  const admin = new Admin(clientOptions(spec, id))
  try {
    return await work(admin)
  } finally {
    await admin.close()
  }
}

// ListOffsets of one partition at a timestamp (-2: earliest, -1: latest); -1 when the broker found none.
async function offsetAt (admin, topic, partition, timestamp) {
  const partitions = [{ partitionIndex: partition, timestamp: BigInt(timestamp) }]
  const [found] = await admin.listOffsets({ topics: [{ name: topic, partitions }] })
  return Number(found.partitions[0].offset)
}

async function listOffsets (spec) {
  return withAdmin(spec, 'lo', async admin => ({
    earliest: await offsetAt(admin, spec.topic, spec.partition, -2),
    latest: await offsetAt(admin, spec.topic, spec.partition, -1),
    at: await offsetAt(admin, spec.topic, spec.partition, spec.timestamp)
  }))
}

// Where a stream starts: the library's modes for earliest and latest, MANUAL offsets for an offset or a timestamp
// (found with the consumer's own ListOffsets; past the last record Kafka finds none, and the stream starts at the end).
async function streamStart (consumer, spec) {
  if (spec.start.type === 'earliest') return { mode: MessagesStreamModes.EARLIEST }
  if (spec.start.type === 'latest') return { mode: MessagesStreamModes.LATEST }
  let offsets = spec.partitions.map(partition => ({ topic: spec.topic, partition, offset: BigInt(spec.start.value) }))
  if (spec.start.type === 'timestamp') {
    const listed = await consumer.listOffsets({ topics: [spec.topic], timestamp: BigInt(spec.start.value) })
    const found = listed.get(spec.topic)
    offsets = offsets.map(o => ({ ...o, offset: found[o.partition] >= 0n ? found[o.partition] : -1n }))
      .filter(o => o.offset >= 0n)
    if (offsets.length === 0) return { mode: MessagesStreamModes.LATEST }
  }
  return { mode: MessagesStreamModes.MANUAL, offsets }
}

// Reads from a stream until `done(got)` holds, failing after timeout_ms; the stream is closed either way.
function readStream (stream, spec, keep, done) {
  const got = []
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(
      `${got.length} records within ${spec.timeout_ms} ms: ${JSON.stringify(got.slice(-3))}`)), spec.timeout_ms)
    stream.on('data', message => {
      if (!keep(message, got)) return
      got.push(fromMessage(message))
      if (done(got)) { clearTimeout(timer); resolve(got) }
    })
    stream.on('error', error => { clearTimeout(timer); reject(error) })
  })
}

// The library's consumers always join a group (its streams fetch what the group assigns): a group of its own, with
// autocommit off, so that nothing is committed.
async function consume (spec) {
  const consumer = new Consumer({
    ...clientOptions(spec, 'c'),
    groupId: randomId('compat-platformatic'),
    autocommit: false,
    maxWaitTime: spec.fetch_wait_ms || 500,
    sessionTimeout: 10000,
    heartbeatInterval: 1000
  })
  try {
    const stream = await consumer.consume({ topics: [spec.topic], ...(await streamStart(consumer, spec)) })
    const records = await readStream(stream, spec, m => spec.partitions.includes(m.partition),
      got => got.length >= spec.count)
    return { records }
  } finally {
    await consumer.close(true)
  }
}

// The cluster and the topics asked about (all when spec.topics is null), partition -> leader; a topic the broker
// calls unknown is left out. Each topic is asked about alone, since the library fails a whole call for one unknown
// topic. auto_create sets the Metadata request's allow_auto_topic_creation.
async function metadata (spec) {
  return withAdmin(spec, 'md', async admin => {
    const topics = {}
    let brokers = null
    const asked = spec.topics === null ? [await admin.listTopics()] : spec.topics.map(topic => [topic])
    for (const names of asked) {
      try {
        const found = await admin.metadata({ topics: names, autocreateTopics: spec.auto_create, forceUpdate: true })
        brokers = found.brokers
        for (const [name, topic] of found.topics) {
          if (names.includes(name)) topics[name] = Object.fromEntries(topic.partitions.map((p, i) => [i, p.leader]))
        }
      } catch (error) {
        // the library's UserError for UNKNOWN_TOPIC_OR_PARTITION
        if (!/^Unknown topic /.test(error.message)) throw error
      }
    }
    brokers = brokers || (await admin.metadata({ topics: [], forceUpdate: true })).brokers
    return { brokers: [...brokers].map(([id, b]) => [id, b.host, b.port]), topics }
  })
}

async function listTopics (spec) {
  return withAdmin(spec, 'lt', async admin => ({ topics: await admin.listTopics({ includeInternals: true }) }))
}

// Joins spec.group, reads spec.count records from its committed offsets (the earliest without them), commits the
// offset after the last record read of each partition, and leaves.
async function groupConsume (spec) {
  const consumer = new Consumer({
    ...clientOptions(spec, 'g'),
    groupId: spec.group,
    autocommit: false,
    maxWaitTime: 200,
    sessionTimeout: 10000,
    heartbeatInterval: 1000
  })
  try {
    const stream = await consumer.consume({
      topics: [spec.topic], mode: MessagesStreamModes.COMMITTED, fallbackMode: 'earliest'
    })
    const records = await readStream(stream, spec, (m, got) => got.length < spec.count, got => got.length >= spec.count)
    const next = new Map()
    for (const r of records) next.set(r.partition, Math.max(next.get(r.partition) || 0, r.offset + 1))
    await consumer.commit({
      offsets: [...next].map(([partition, offset]) => commitOffset(spec.topic, partition, offset))
    })
    return { records }
  } finally {
    await consumer.close(true)
  }
}

// An offset to commit as the library takes it (leader epoch unknown).
const commitOffset = (topic, partition, offset) => ({ topic, partition, offset: BigInt(offset), leaderEpoch: -1 })

// Every offset a group committed, "topic:partition" -> offset (OffsetFetch for all topics).
async function groupOffsets (admin, group) {
  const [found] = await admin.listConsumerGroupOffsets({ groups: [group] })
  const offsets = {}
  for (const topic of found.topics) {
    for (const p of topic.partitions) {
      if (p.committedOffset >= 0n) offsets[`${topic.name}:${p.partitionIndex}`] = Number(p.committedOffset)
    }
  }
  return offsets
}

async function committed (spec) {
  return withAdmin(spec, 'co', async admin => {
    const offsets = await groupOffsets(admin, spec.group)
    return {
      offsets: Object.fromEntries(Object.entries(offsets).filter(([k]) => k.startsWith(`${spec.topic}:`))
        .map(([k, o]) => [k.slice(spec.topic.length + 1), o]))
    }
  })
}

// The admin calls of spec.calls in order over one admin client (see ADMIN_CALLS); each answer is {result} or
// {error}, and a failed call does not stop the next.
async function admin (spec) {
  return withAdmin(spec, 'adm', async admin => {
    const results = []
    for (const call of spec.calls) {
      try {
        results.push({ result: await ADMIN_CALLS[call.call](admin, call) })
      } catch (error) {
        results.push({ error: errorDetail(error) })
      }
    }
    return { results }
  })
}

const { SET, DELETE } = IncrementalAlterConfigOperationTypes
const RESOURCE_TYPES = { topic: ConfigResourceTypes.TOPIC, broker: ConfigResourceTypes.BROKER }
// The library's ConsumerGroupStates -> Kafka's names.
const GROUP_STATES = {
  STABLE: 'Stable',
  EMPTY: 'Empty',
  DEAD: 'Dead',
  PREPARING_REBALANCE: 'PreparingRebalance',
  COMPLETING_REBALANCE: 'CompletingRebalance'
}

const ADMIN_CALLS = {
  create_topics: async (admin, c) => {
    const created = await admin.createTopics({
      topics: c.topics, partitions: c.partitions, replicas: c.replicas ?? 1, configs: c.configs || []
    })
    return created.map(t => ({ name: t.name, id: t.id, partitions: t.partitions, replicas: t.replicas }))
  },
  delete_topics: async (admin, c) => { await admin.deleteTopics({ topics: c.topics }); return null },
  // assignments null: the broker places the new partitions (an empty list would say "these N new partitions have
  // no assignments", which Kafka refuses with INVALID_REPLICA_ASSIGNMENT).
  create_partitions: async (admin, c) => {
    await admin.createPartitions({
      topics: c.topics.map(([name, count]) => ({ name, count, assignments: null })), validateOnly: !!c.validate_only
    })
    return null
  },
  list_topics: async admin => admin.listTopics(),
  partitions: async (admin, c) => {
    const found = await admin.metadata({ topics: c.topics, forceUpdate: true })
    return Object.fromEntries(c.topics.map(t => [t, found.topics.get(t).partitionsCount]))
  },
  describe_configs: async (admin, c) => (await admin.describeConfigs({
    resources: [{ resourceType: RESOURCE_TYPES[c.type], resourceName: c.name, configurationKeys: c.keys || null }]
  }))[0].configs.map(e => ({
    name: e.name, value: e.value, readOnly: e.readOnly, source: e.configSource, sensitive: e.isSensitive
  })),
  alter_configs: async (admin, c) => {
    await admin.incrementalAlterConfigs({
      resources: [{
        resourceType: RESOURCE_TYPES[c.type],
        resourceName: c.name,
        configs: [
          ...Object.entries(c.set || {}).map(([name, value]) => ({ name, value, configOperation: SET })),
          ...(c.delete || []).map(name => ({ name, value: null, configOperation: DELETE }))
        ]
      }],
      validateOnly: !!c.validate_only
    })
    return null
  },
  list_groups: async (admin, c) => {
    const options = c.states ? { states: c.states } : {}
    return [...(await admin.listGroups(options)).values()]
      .map(g => ({ id: g.id, state: GROUP_STATES[g.state] || g.state, protocolType: g.protocolType }))
  },
  describe_groups: async (admin, c) => [...(await admin.describeGroups({ groups: c.groups })).values()].map(g => ({
    id: g.id,
    state: GROUP_STATES[g.state] || g.state,
    protocolType: g.protocolType,
    protocol: g.protocol,
    members: [...g.members.values()].map(m => ({
      memberId: m.id,
      clientId: m.clientId,
      host: m.clientHost,
      instanceId: m.groupInstanceId,
      assignment: [...(m.assignments || new Map()).values()].flatMap(a => a.partitions.map(p => [a.topic, p]))
    }))
  })),
  group_offsets: async (admin, c) => groupOffsets(admin, c.group),
  delete_groups: async (admin, c) => { await admin.deleteGroups({ groups: c.groups }); return null }
}

// Several operations in one node process (loading the library costs about a second of CPU): spec.steps, each a spec
// of its own without `brokers`, one after the other or, with spec.concurrent, all at once. Each answer is {result}
// or {error}; a failed step does not stop the others.
async function batch (spec) {
  const run = async step => {
    try {
      return { result: await OPS[step.op]({ brokers: spec.brokers, ...step }) }
    } catch (error) {
      return { error: errorDetail(error) }
    }
  }
  if (spec.concurrent) return { results: await Promise.all(spec.steps.map(run)) }
  const results = []
  for (const step of spec.steps) results.push(await run(step))
  return { results }
}

// Transactional producers following spec.steps (see TxnStep in base.py); each step's outcome is 'ok' or
// 'error:<Kafka error name>'. After an "abandon" the script exits without closing anything: the broker must time the
// open transaction out. The library sends the transactional InitProducerId in its first beginTransaction(), so
// "init" begins a transaction and cancels it locally (cancel() sends nothing); the next begin reuses that producer id.
// It sends producer id 0 and epoch 0 there, not -1 and -1: Kafka takes them for the producer's own id, so a second
// producer of a transactional id that another producer holds is answered PRODUCER_FENCED instead of fencing it.
async function txnScript (spec) {
  const producers = {}
  const transactions = {}
  const outcomes = []
  let abandoned = false
  for (const step of spec.steps) {
    try {
      if (step.op === 'init') {
        // `timeout` is what the library's InitProducerId sends as transaction_timeout_ms (and Produce's timeout)
        producers[step.producer] = newProducer(spec, `t-${step.producer}`, {
          idempotent: true, transactionalId: step.transactional_id, timeout: step.timeout_ms, retries: 5,
          retryDelay: 100
        })
        await (await producers[step.producer].beginTransaction()).cancel() // FindCoordinator, InitProducerId
      } else if (step.op === 'begin') {
        transactions[step.producer] = await producers[step.producer].beginTransaction()
      } else if (step.op === 'send') {
        await transactions[step.producer].send({ messages: step.records.map(r => toMessage(spec.topic, r)) })
      } else if (step.op === 'commit') {
        await transactions[step.producer].commit()
      } else if (step.op === 'abort') {
        await transactions[step.producer].abort()
      } else if (step.op === 'abandon') {
        abandoned = true
      } else throw new Error(`unknown step ${step.op}`)
      outcomes.push('ok')
    } catch (error) {
      outcomes.push(`error:${apiIds(error)[0] || error.code || error.name}`)
    }
  }
  if (!abandoned) {
    for (const producer of Object.values(producers)) await producer.close(true)
  }
  return { outcomes }
}

// Reads spec.until's partitions from the earliest offset (read_committed unless spec.read_uncommitted) until the
// stream's next fetch offset of each reaches spec.until[partition] (control batches and aborted records count: the
// stream moves past them without delivering them).
async function readToEnd (spec) {
  const consumer = new Consumer({
    ...clientOptions(spec, 'r'),
    groupId: randomId('compat-platformatic-rte'),
    autocommit: false,
    maxWaitTime: 100,
    isolationLevel: spec.read_uncommitted ? FetchIsolationLevels.READ_UNCOMMITTED : FetchIsolationLevels.READ_COMMITTED
  })
  const got = []
  const positions = {}
  const key = p => `${spec.topic}:${p}`
  try {
    const stream = await consumer.consume({ topics: [spec.topic], mode: MessagesStreamModes.EARLIEST })
    await new Promise((resolve, reject) => {
      const check = () => {
        for (const p of Object.keys(spec.until)) positions[p] = Number(stream.offsetsToFetch.get(key(p)) ?? 0n)
        if (Object.entries(spec.until).every(([p, end]) => positions[p] >= end)) { clearTimeout(timer); resolve() }
      }
      const timer = setTimeout(() => reject(new Error(`positions ${JSON.stringify(positions)} short of ` +
        `${JSON.stringify(spec.until)} within ${spec.timeout_ms} ms`)), spec.timeout_ms)
      stream.on('data', message => got.push(fromMessage(message)))
      stream.on('fetch', check)
      stream.on('error', error => { clearTimeout(timer); reject(error) })
    })
  } finally {
    await consumer.close(true)
  }
  return { records: got, positions }
}

// The Kafka error names (ProtocolError's apiId) anywhere in an error and the errors it gathers or wraps.
function apiIds (error, depth = 0) {
  if (!error || depth > 6) return []
  const found = error.apiId ? [error.apiId] : []
  for (const inner of error.errors || []) found.push(...apiIds(inner, depth + 1))
  if (error.cause && error.cause !== error) found.push(...apiIds(error.cause, depth + 1))
  return found
}

// An error as the Python side sees it: its Kafka error names, and the messages of the errors it gathers or wraps.
function errorDetail (error) {
  return { name: error.name, code: error.code, message: error.message, apiIds: apiIds(error), causes: causes(error) }
}

function causes (error, depth = 0) {
  if (!error || depth > 6) return []
  const inner = [...(error.errors || []), ...(error.cause && error.cause !== error ? [error.cause] : [])]
  return inner.flatMap(e => [`${e.name}: ${e.message}`, ...causes(e, depth + 1)])
}

// A member's failure: reported as an `error` event naming its Kafka errors, and the process ends.
const fail = error => {
  emit('error', { message: `${error.name}: ${error.message} ${JSON.stringify(apiIds(error))}` })
  exitAfterOutput(1)
}

// A group member (see member.py for the protocol). The library's classic protocol rebalances eagerly: a
// consumer:group:rebalance event means the member rejoins, dropping its assignment, and consumer:group:join carries
// the new one whole. Its own assignor is roundrobin, which is what spec.strategy null means here.
async function member (spec) {
  const kip848 = spec.group_protocol === 'consumer'
  const consumer = new Consumer({
    ...clientOptions({ brokers: spec.bootstrap }, 'm', spec.client_id),
    retries: 5,
    groupId: spec.group,
    groupInstanceId: spec.instance_id || undefined,
    autocommit: false,
    maxWaitTime: spec.fetch_wait_ms,
    // KIP-848: the broker sets session and heartbeat; the library's defaults stand for the rest
    ...(kip848
      ? { groupProtocol: 'consumer', groupRemoteAssignor: spec.remote_assignor || undefined }
      : {
          sessionTimeout: spec.session_timeout_ms,
          heartbeatInterval: spec.heartbeat_interval_ms,
          rebalanceTimeout: spec.rebalance_timeout_ms
        })
  })
  let assignment = []
  const positions = new Map() // partition -> offset after the last record delivered
  const ownPartitions = assignments =>
    [...((assignments || []).find(a => a.topic === spec.topic)?.partitions || [])].sort((a, b) => a - b)
  if (kip848) {
    // KIP-848: the library emits no event for a new assignment; it is in consumer.assignments after a heartbeat
    // (ConsumerGroupHeartbeat), and reported here as the incremental change it is.
    consumer.on('consumer:heartbeat:end', () => {
      const now = ownPartitions(consumer.assignments)
      const revoked = assignment.filter(p => !now.includes(p))
      const added = now.filter(p => !assignment.includes(p))
      if (revoked.length) {
        assignment = assignment.filter(p => now.includes(p))
        emit('revoked', { partitions: revoked, assignment })
      }
      if (added.length) {
        assignment = now
        emit('assigned', { partitions: added, assignment })
      }
    })
  } else {
    consumer.on('consumer:group:join', ({ assignments }) => {
      assignment = ownPartitions(assignments)
      emit('assigned', { partitions: assignment, assignment })
    })
    consumer.on('consumer:group:rebalance', () => {
      if (assignment.length === 0) return
      const dropped = assignment
      assignment = []
      emit('revoked', { partitions: dropped, assignment })
    })
  }
  const stream = await consumer.consume({
    topics: [spec.topic], mode: MessagesStreamModes.COMMITTED, fallbackMode: 'earliest'
  })
  stream.on('data', message => {
    positions.set(message.partition, Number(message.offset) + 1)
    const value = message.value === undefined ? null : message.value.toString('utf8')
    emit('records', { records: [[message.partition, Number(message.offset), value]] })
  })
  stream.on('error', fail)
  serveMember({
    positions,
    owned: () => new Set(assignment),
    commit: offsets =>
      consumer.commit({ offsets: offsets.map(([partition, offset]) => commitOffset(spec.topic, partition, offset)) }),
    close: () => consumer.close(true), // LeaveGroup
    fail
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
  admin,
  batch,
  txn_script: txnScript,
  read_to_end: readToEnd
}

main(OPS, member, errorDetail, fail)
