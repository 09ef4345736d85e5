// What rdkafka_callback.js (node-rdkafka's API) and rdkafka_kafkajs.js (@confluentinc/kafka-javascript's KafkaJS
// API) share: records as the Python side sends them, the one-operation main loop and the group member's command
// stream (tests/compat/clients/rdkafka_js_client.py, member.py).
//
// A program reads one JSON spec on stdin, runs OPS[spec.op], prints `RESULT <json>` and exits 0, or prints
// `ERROR <json>` and exits 1. With `--member '<spec>'` it is one group member speaking member.py's line protocol.
// librdkafka's own log lines go to stderr, never mixed with the result.
'use strict'

const toB64 = b => (b === null || b === undefined ? null : Buffer.from(b).toString('base64'))
const fromB64 = s => (s === null || s === undefined ? null : Buffer.from(s, 'base64'))

// The settings every client of both programs takes: librdkafka's names.
function commonConfig (bootstrap, role) {
  const config = {
    'bootstrap.servers': bootstrap,
    'client.id': `compat-rdkjs-${role}-${Math.random().toString(16).slice(2, 8)}`,
    'broker.address.family': 'v4',
    'message.max.bytes': 4 * 1024 * 1024 // records.MAX_MESSAGE_BYTES: the 1 MiB record and its overhead
  }
  // e.g. COMPAT_LIBRDKAFKA_DEBUG=cgrp,protocol puts librdkafka's debug log in the process's stderr
  if (process.env.COMPAT_LIBRDKAFKA_DEBUG) config.debug = process.env.COMPAT_LIBRDKAFKA_DEBUG
  return config
}

// An error and its librdkafka code name when it has one (LibrdKafkaError, KafkaJSError wrapping one).
function errorDetail (error, codeNames = {}, depth = 0) {
  const detail = { name: error.name, message: error.message, code: error.code, type: error.type }
  if (typeof error.code === 'number' && codeNames[error.code]) detail.kafka = codeNames[error.code]
  const cause = error.cause || error.originalError
  if (cause && cause !== error && depth < 5) detail.cause = errorDetail(cause, codeNames, depth + 1)
  return detail
}

const emit = (type, fields) => process.stdout.write(`EVENT ${JSON.stringify({ type, ...fields })}\n`)
// Exits once stdout is flushed: process.exit would drop the rest of a large write to a pipe.
const exitAfterOutput = code => process.stdout.write('', () => process.exit(code))

// Calls `handle(command)` for each command line of stdin, one at a time and in order; end of input is a close.
// A failing command ends the member with an error event.
function serveCommands (handle) {
  const lines = require('readline').createInterface({ input: process.stdin })
  let queue = Promise.resolve()
  const enqueue = command => {
    queue = queue.then(() => handle(command))
      .catch(error => { emit('error', { message: `${error.name}: ${error.message}` }); exitAfterOutput(1) })
  }
  lines.on('line', line => { if (line.trim()) enqueue(JSON.parse(line)) })
  lines.on('close', () => enqueue({ op: 'close' }))
}

// The offsets a commit command names: its own, or the offset after the last record delivered of each partition
// the member owns now.
function offsetsToCommit (command, positions, assignment) {
  if (command.offsets) return Object.entries(command.offsets).map(([p, o]) => [Number(p), Number(o)])
  return [...positions].filter(([p]) => assignment.has(p))
}

async function main (ops, member, codeNames) {
  if (process.argv[2] === '--member') {
    try {
      await member(JSON.parse(process.argv[3]))
    } catch (error) {
      emit('error', { message: `${error.name}: ${error.message}` })
      exitAfterOutput(1)
    }
    return
  }
  const chunks = []
  for await (const chunk of process.stdin) chunks.push(chunk)
  const spec = JSON.parse(Buffer.concat(chunks).toString('utf8'))
  try {
    const result = await ops[spec.op](spec)
    process.stdout.write(`RESULT ${JSON.stringify(result)}\n`)
    exitAfterOutput(0)
  } catch (error) {
    process.stdout.write(`ERROR ${JSON.stringify(errorDetail(error, codeNames))}\n`)
    exitAfterOutput(1)
  }
}

module.exports = {
  toB64, fromB64, commonConfig, errorDetail, emit, exitAfterOutput, serveCommands, offsetsToCommit, main
}
