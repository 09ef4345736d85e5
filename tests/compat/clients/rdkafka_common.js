// What rdkafka_callback.js (node-rdkafka's API) and rdkafka_kafkajs.js (@confluentinc/kafka-javascript's KafkaJS
// API) share: librdkafka's settings and error names, and program_io.js (the input and output of every node program:
// one JSON spec in, `RESULT <json>` or `ERROR <json>` out; `--member '<spec>'`: member.py's line protocol), whose
// functions this module passes on (tests/compat/clients/rdkafka_js_client.py).
// librdkafka's own log lines go to stderr, never mixed with the result.
'use strict'

const io = require('./program_io')

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

// program_io's main, its errors named with librdkafka's `codeNames`.
function main (ops, member, codeNames) {
  return io.main(ops, member, error => errorDetail(error, codeNames))
}

module.exports = { ...io, commonConfig, errorDetail, main }
