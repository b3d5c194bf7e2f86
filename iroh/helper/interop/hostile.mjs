// A hostile, unmodified @number0/iroh endpoint for the node's limits test
// (node/iroh_test.go, TestIrohHostileEndpoint): it opens more connections
// and streams to a node than the node's bounds allow, holds them open,
// and reports what it got. Nothing here knows fleetmesh's helper protocol.
//
//   node hostile.mjs ID ADDR ALPN[,ALPN...] CONNS STREAMS SECONDS
//
// CONNS connections to ID at ADDR, over the ALPNs in turn, STREAMS streams
// in all spread
// over them, each sending one byte (a stream reaches the node only once it
// carries data) and then nothing. A stream the node resets counts as
// refused; one still open after the wait counts as held; one QUIC's
// credit never let open counts as blocked. The run is bounded: it prints
// one JSON line and exits within SECONDS + 5 s whatever happens.
import { Endpoint, EndpointAddr, EndpointId, RelayMode } from '@number0/iroh'

const [id, addr, alpnArg, connsArg, streamsArg, secondsArg] = process.argv.slice(2)
const alpns = (alpnArg || '').split(',').filter((a) => a)
const conns = Number(connsArg)
const streams = Number(streamsArg)
const seconds = Number(secondsArg)
if (!id || !addr || alpns.length === 0 || !(conns > 0) || !(streams > 0) || !(seconds > 0)) {
  console.error('usage: node hostile.mjs ID ADDR ALPN[,ALPN...] CONNS STREAMS SECONDS')
  process.exit(2)
}
setTimeout(() => { console.error('hostile.mjs: out of time'); process.exit(3) }, (seconds + 5) * 1000).unref()

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms))
const b = Endpoint.builder()
b.applyMinimal()
b.alpns([])
b.relayMode(RelayMode.disabled())
b.bindAddr('127.0.0.1:0')
const ep = await b.bind()
const self = ep.id().toString()

const got = { id: self, conns: 0, connsClosed: 0, connsFailed: 0, held: 0, refused: 0, blocked: 0 }
const open = []
for (let i = 0; i < conns; i++) {
  try {
    const alpn = alpns[i % alpns.length]
    const conn = await ep.connect(new EndpointAddr(EndpointId.fromString(id), null, [addr]), Array.from(Buffer.from(alpn)))
    got.conns++
    let closed = false
    conn.closed().catch(() => {}).then(() => { closed = true })
    open.push({ conn, isClosed: () => closed })
  } catch {
    got.connsFailed++
  }
}

// Each stream: open (within the wait: QUIC credit may hold it back), send
// one byte, then watch for a reset until the wait ends.
const deadline = Date.now() + seconds * 1000
const attempt = async (c) => {
  const bi = await Promise.race([c.conn.openBi().catch(() => null), sleep(Math.max(0, deadline - Date.now())).then(() => undefined)])
  if (bi === undefined) { got.blocked++; return }
  if (bi === null) { got.refused++; return }
  try {
    await bi.send.writeAll([0x7b])
    const r = await Promise.race([bi.recv.read(1).then(() => 'data', () => 'reset'), sleep(Math.max(0, deadline - Date.now())).then(() => 'held')])
    if (r === 'held') got.held++; else got.refused++
  } catch {
    got.refused++
  }
}
const all = []
for (let i = 0; i < streams && open.length > 0; i++) {
  all.push(attempt(open[i % open.length]))
  // A steady flood, not one burst: refusals reach the node over time.
  if (i % 16 === 15) await sleep(20)
}
await Promise.all(all)
got.connsClosed = open.filter((c) => c.isClosed()).length
console.log(JSON.stringify(got))
process.exit(0)
