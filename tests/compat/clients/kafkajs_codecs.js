// What kafkajs_client.js and record_kafkajs.js share: kafkajs with every codec plugged in, and records' fields as
// the Python side sends them (base64 bytes, headers as [name, value] pairs).
'use strict'

const { CompressionTypes, CompressionCodecs } = require('kafkajs')
const SnappyCodec = require('kafkajs-snappy')
const LZ4Module = require('kafkajs-lz4')
const zstd = require('@bokuweb/zstd-wasm')

// kafkajs implements gzip itself; the other codecs plug in through CompressionCodecs.
const LZ4Codec = LZ4Module.default || LZ4Module
CompressionCodecs[CompressionTypes.Snappy] = SnappyCodec
CompressionCodecs[CompressionTypes.LZ4] = new LZ4Codec().codec
// No maintained zstd codec for kafkajs builds on current node: wrap the WebAssembly build of libzstd.
// It is initialised once: kafkajs decodes the batches of a fetch response concurrently, and an init() running
// while another batch is being decompressed replaces the module under it (decompression then fails, code -72).
let zstdReady = null
const zstdInit = () => (zstdReady = zstdReady || zstd.init())
CompressionCodecs[CompressionTypes.ZSTD] = () => ({
  async compress (encoder) {
    await zstdInit()
    return Buffer.from(zstd.compress(encoder.buffer, 3))
  },
  async decompress (buffer) {
    await zstdInit()
    return Buffer.from(zstd.decompress(buffer))
  }
})

const CODECS = {
  none: CompressionTypes.None,
  gzip: CompressionTypes.GZIP,
  snappy: CompressionTypes.Snappy,
  lz4: CompressionTypes.LZ4,
  zstd: CompressionTypes.ZSTD
}

const fromB64 = s => (s === null ? null : Buffer.from(s, 'base64'))

// Headers as kafkajs takes them: an object, a repeated name becoming an array (sent as consecutive headers, so
// repeated names must be adjacent for the wire order to be the pairs' order).
function toHeaders (pairs) {
  const headers = {}
  for (const [name, value] of pairs) {
    const buf = fromB64(value)
    if (!(name in headers)) headers[name] = buf
    else if (Array.isArray(headers[name])) headers[name].push(buf)
    else headers[name] = [headers[name], buf]
  }
  return headers
}

module.exports = { CODECS, fromB64, toHeaders }
