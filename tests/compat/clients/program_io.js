// What the node programs of the compat matrix share (kafkajs_client.js, platformatic_client.js, cluster_kafkajs.js,
// and through rdkafka_common.js rdkafka_callback.js and rdkafka_kafkajs.js): their input and output, not a client.
//
// One-shot mode: the program reads one JSON spec (on stdin; cluster_kafkajs.js: its argument), runs ops[spec.op],
// prints `RESULT <json>` and exits 0, or prints `ERROR <json>` and exits 1 (node_program.py reads them).
// Member mode (`--member '<spec>'`): one group member speaking the line protocol of member.py, `EVENT <json>` lines
// out, command lines in. Keys, values and header values travel in base64.
'use strict'

const toB64 = b => (b === null || b === undefined ? null : Buffer.from(b).toString('base64'))
const fromB64 = s => (s === null || s === undefined ? null : Buffer.from(s, 'base64'))

const emit = (type, fields) => process.stdout.write(`EVENT ${JSON.stringify({ type, ...fields })}\n`)
// Exits once everything written to stdout is out: a pipe may take a large write only in parts, and process.exit
// would drop the rest.
const exitAfterOutput = code => process.stdout.write('', () => process.exit(code))

// A member's failure: reported as an `error` event, and the process ends.
function failMember (error) {
  emit('error', { message: `${error.name}: ${error.message}` })
  exitAfterOutput(1)
}

// Calls `handle(command)` for each command line of stdin, one at a time and in order, as member.py expects; end of
// input is a close. A failing command ends the member through `fail`.
function serveCommands (handle, fail = failMember) {
  const lines = require('readline').createInterface({ input: process.stdin })
  let queue = Promise.resolve()
  const enqueue = command => { queue = queue.then(() => handle(command)).catch(fail) }
  lines.on('line', line => { if (line.trim()) enqueue(JSON.parse(line)) })
  lines.on('close', () => enqueue({ op: 'close' }))
}

// The offsets a commit command names: its own, or the offset after the last record delivered of each partition
// the member owns now (`owned`: a Set).
function offsetsToCommit (command, positions, owned) {
  if (command.offsets) return Object.entries(command.offsets).map(([p, o]) => [Number(p), Number(o)])
  return [...positions].filter(([p]) => owned.has(p))
}

// member.py's commands for a consumer: ping; commit, through `commit([[partition, offset]...])` (offsetsToCommit
// of `positions` and `owned()`); close, once, through `close()` (which leaves the group).
function serveMember ({ positions, owned, commit, close, fail = failMember }) {
  let closing = false
  serveCommands(async command => {
    if (command.op === 'ping') emit('pong', {})
    else if (command.op === 'commit') {
      const offsets = offsetsToCommit(command, positions, owned()).sort((a, b) => a[0] - b[0])
      await commit(offsets)
      emit('committed', { offsets: Object.fromEntries(offsets) })
    } else if (command.op === 'close') {
      if (closing) return
      closing = true
      await close()
      emit('closed', {})
      exitAfterOutput(0)
    } else throw new Error(`unknown command ${JSON.stringify(command)}`)
  }, fail)
}

// Runs ops[spec.op](spec) and prints its RESULT, or the ERROR errorDetail(error) makes of its failure; then exits.
async function answer (ops, spec, errorDetail) {
  try {
    const result = await ops[spec.op](spec)
    process.stdout.write(`RESULT ${JSON.stringify(result)}\n`)
    exitAfterOutput(0)
  } catch (error) {
    process.stdout.write(`ERROR ${JSON.stringify(errorDetail(error))}\n`)
    exitAfterOutput(1)
  }
}

// The program's entry: `member(spec)` in member mode (its failure through `fail`), else one of `ops` on stdin's spec.
async function main (ops, member, errorDetail, fail = failMember) {
  if (process.argv[2] === '--member') {
    try {
      await member(JSON.parse(process.argv[3]))
    } catch (error) {
      fail(error)
    }
    return
  }
  const chunks = []
  for await (const chunk of process.stdin) chunks.push(chunk)
  await answer(ops, JSON.parse(Buffer.concat(chunks).toString('utf8')), errorDetail)
}

module.exports = {
  toB64, fromB64, emit, exitAfterOutput, failMember, serveCommands, offsetsToCommit, serveMember, answer, main
}
