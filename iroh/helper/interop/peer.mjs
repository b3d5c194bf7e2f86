// An unmodified @number0/iroh endpoint for fleetmesh's interop tests
// (iroh/interop_test.go): nothing here knows fleetmesh's helper protocol.
//
//   node peer.mjs serve ALPN            accept one connection, answer one message
//   node peer.mjs dial ID ADDR ALPN MSG dial ID at ADDR, send MSG, print the answer
//
// Each message is the stream's whole content (the sender finishes the
// stream). FLEETMESH_IROH_RELAY, if set, is the only relay the endpoint uses;
// dial then prints the connection's selected path ("relay" or "direct").
// With FLEETMESH_PEER_HEX=1 the dialled MSG and the printed answer are hex,
// for binary protocols.
import { Endpoint, EndpointAddr, EndpointId, RelayMode } from '@number0/iroh'

const [mode, ...args] = process.argv.slice(2)
const relay = process.env.FLEETMESH_IROH_RELAY || ''
const enc = (s) => Array.from(Buffer.from(s))

async function bind (alpns) {
  const b = Endpoint.builder()
  b.applyMinimal()
  b.alpns(alpns.map(enc))
  b.relayMode(relay ? RelayMode.customFromUrls([relay]) : RelayMode.disabled())
  b.bindAddr('127.0.0.1:0')
  return b.bind()
}

function pathKind (paths) {
  const sel = paths.find((p) => p.isSelected)
  if (!sel) return 'none'
  return sel.isRelay ? 'relay' : 'direct'
}

async function readAll (recv) {
  return Buffer.from(await recv.readToEnd(1 << 20)).toString()
}

if (mode === 'serve') {
  const [alpn] = args
  const ep = await bind([alpn])
  console.log(JSON.stringify({ id: ep.id().toString(), addrs: ep.addr().directAddresses() }))
  // Handshakes that fail (a dialler expecting another EndpointId) are
  // skipped: the first connection that completes is served.
  let conn, bi
  for (;;) {
    const inc = await ep.acceptNext()
    try {
      conn = await (await inc.accept()).connect()
      bi = await conn.acceptBi()
      break
    } catch (e) {
      console.error('peer.mjs: incoming connection failed: ' + String(e.message || e).split('\n')[0])
    }
  }
  const got = await readAll(bi.recv)
  await bi.send.writeAll(enc('js got: ' + got))
  await bi.send.finish()
  console.log(JSON.stringify({ remote: conn.remoteId().toString(), alpn: Buffer.from(conn.alpn()).toString(), got }))
  // Linger so the answer's last packets are delivered, not for a result.
  await Promise.race([conn.closed().catch(() => {}), new Promise((resolve) => setTimeout(resolve, 3000))])
  process.exit(0)
} else if (mode === 'dial') {
  const [id, addr, alpn, text] = args
  const ep = await bind([])
  try {
    const conn = await ep.connect(new EndpointAddr(EndpointId.fromString(id), relay || null, addr ? [addr] : []), enc(alpn))
    const bi = await conn.openBi()
    const hex = process.env.FLEETMESH_PEER_HEX === '1'
    await bi.send.writeAll(hex ? Array.from(Buffer.from(text, 'hex')) : enc(text))
    await bi.send.finish()
    const raw = Buffer.from(await bi.recv.readToEnd(1 << 20))
    const got = hex ? raw.toString('hex') : raw.toString()
    // The selected path when the answer came, and (FLEETMESH_PEER_WAIT_DIRECT
    // = seconds) whether it became direct within that long.
    const path = pathKind(conn.paths())
    let later = path
    const wait = Number(process.env.FLEETMESH_PEER_WAIT_DIRECT || 0)
    for (let i = 0; i < wait * 4 && later !== 'direct'; i++) {
      await new Promise((resolve) => setTimeout(resolve, 250))
      later = pathKind(conn.paths())
    }
    console.log(JSON.stringify({ remote: conn.remoteId().toString(), got, path, path_later: later }))
    conn.close(0n, enc('done'))
    process.exit(0)
  } catch (e) {
    console.log(JSON.stringify({ error: String(e.message || e).split('\n')[0] }))
    process.exit(1)
  }
} else {
  console.error('usage: peer.mjs serve ALPN | dial ID ADDR ALPN MSG')
  process.exit(2)
}
