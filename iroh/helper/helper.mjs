// The iroh helper of a fleetmesh node (spec/iroh.md, "The helper"): an iroh
// endpoint of the official binding, @number0/iroh, that the node starts,
// supervises and speaks to over a Unix socket in its home. It holds no state
// of its own: the node sends it the secret key, the ALPNs, the relays and the
// bind addresses on every start, so a restarted helper is the same endpoint.
//
// Every connection to the node's socket begins with one JSON line. The first
// connection is the control channel ("control"): the node answers with
// "config", the helper binds and says "ready"; after that the node sends
// "dial" requests and the helper sends connection events. Every iroh
// bi-stream, accepted or dialled, is one further socket connection
// ("stream") whose bytes after the line are the stream's bytes; a
// half-close on either side is a QUIC finish.
import net from 'node:net'
import readline from 'node:readline'
import { Endpoint, EndpointAddr, EndpointId, RelayMode } from '@number0/iroh'

const sockPath = process.env.FLEETMESH_IROH_SOCK
const token = process.env.FLEETMESH_IROH_TOKEN
if (!sockPath || !token) {
  console.error('fleetmesh iroh helper: FLEETMESH_IROH_SOCK and FLEETMESH_IROH_TOKEN must be set (the node starts this script)')
  process.exit(2)
}

// Bounds. A stream's chunk bound is the largest read handed to the socket.
const chunkBytes = 64 * 1024
const maxPending = 1024 * 1024
const maxLineBytes = 64 * 1024
// How often addresses and connection paths are looked at.
const pollMs = 1000

let endpoint = null
let relays = new Set()
let alpns = new Set()
let nextConn = 1
// Outgoing connections, reused per remote and ALPN: iroh connections are
// per ALPN, and a QUIC connection carries many bi-streams.
const outgoing = new Map()

const control = net.createConnection(sockPath)
control.on('error', (e) => fatal('control socket: ' + e.message))
control.on('close', () => fatal('the node closed the control socket'))
send({ t: 'control', token })

function send (msg) { control.write(JSON.stringify(msg) + '\n') }

function fatal (why) {
  console.error('fleetmesh iroh helper: ' + why)
  process.exit(1)
}

const lines = readline.createInterface({ input: control, crlfDelay: Infinity })
lines.on('line', (line) => {
  if (line.length > maxLineBytes) return fatal('control line too long')
  let msg
  try { msg = JSON.parse(line) } catch (e) { return fatal('control line is not JSON: ' + e.message) }
  if (msg.t === 'config') return configure(msg).catch((e) => fatal('bind: ' + e.message))
  if (msg.t === 'dial') return dial(msg)
  if (msg.t === 'relays') return setRelays(msg.relays || []).catch((e) => send({ t: 'error', err: 'relays: ' + e.message }))
  if (msg.t === 'close') return shutdown()
  send({ t: 'error', err: 'unknown control message ' + JSON.stringify(msg.t) })
})

async function configure (msg) {
  const b = Endpoint.builder()
  // Minimal: no discovery service, no DNS, no n0 relays. Relays are only
  // the ones the node names.
  b.applyMinimal()
  b.secretKey(Array.from(Buffer.from(msg.key, 'hex')))
  alpns = new Set(msg.alpns)
  b.alpns(msg.alpns.map((a) => Array.from(Buffer.from(a))))
  // A custom relay map, empty when the node names none: relays learnt
  // later are inserted into it (insertRelay does nothing under
  // RelayMode.disabled()).
  relays = new Set(msg.relays || [])
  b.relayMode(RelayMode.customFromUrls([...relays]))
  for (const a of msg.bind || []) b.bindAddr(a)
  endpoint = await b.bind()
  const ready = () => {
    const addr = endpoint.addr()
    return { t: 'ready', id: endpoint.id().toString(), addrs: addr.directAddresses(), relay: addr.relayUrl() || '', bound: endpoint.boundSockets() }
  }
  let last = ready()
  send(last)
  // Polled: the binding's watchAddr and watchPaths (1.1.0) abort the
  // process ("there is no reactor running") when called from JS.
  setInterval(() => {
    const r = ready()
    if (JSON.stringify(r) !== JSON.stringify(last)) { last = r; send({ ...r, t: 'addr' }) }
  }, pollMs).unref()
  acceptLoop()
}

// setRelays makes the endpoint's relay map the node's list.
async function setRelays (urls) {
  if (!endpoint) return
  const want = new Set(urls)
  for (const u of [...relays]) {
    if (!want.has(u)) { await endpoint.removeRelay(u); relays.delete(u) }
  }
  for (const u of want) {
    if (!relays.has(u)) { await endpoint.insertRelay({ url: u }); relays.add(u) }
  }
}

function pathKind (paths) {
  const sel = paths.find((p) => p.isSelected)
  if (!sel) return 'none'
  return sel.isRelay ? 'relay' : 'direct'
}

// track reports a connection, its selected path as it changes, and its end.
function track (conn, dir) {
  const cid = nextConn++
  const remote = conn.remoteId().toString()
  const alpn = Buffer.from(conn.alpn()).toString()
  let kind = pathKind(conn.paths())
  send({ t: 'conn', cid, remote, alpn, dir, path: kind })
  const poll = setInterval(() => {
    let k
    try { k = pathKind(conn.paths()) } catch { return }
    if (k !== kind) { kind = k; send({ t: 'path', cid, path: k }) }
  }, pollMs)
  poll.unref()
  conn.closed().catch(() => {}).then(() => {
    clearInterval(poll)
    send({ t: 'closed', cid })
  })
  return cid
}

async function acceptLoop () {
  for (;;) {
    const inc = await endpoint.acceptNext()
    if (!inc) return
    ;(async () => {
      const acc = await inc.accept()
      const conn = await acc.connect()
      const alpn = Buffer.from(conn.alpn()).toString()
      if (!alpns.has(alpn)) { conn.close(0n, Array.from(Buffer.from('unknown alpn'))); return }
      track(conn, 'in')
      const remote = conn.remoteId().toString()
      for (;;) {
        let bi
        try { bi = await conn.acceptBi() } catch { return }
        pipe(bi, { t: 'stream', token, req: 0, alpn, remote })
      }
    })().catch(() => {})
  }
}

async function connection (msg) {
  const key = msg.id + ' ' + msg.alpn
  let p = outgoing.get(key)
  if (!p) {
    // A peer whose relay the node does not know is tried at this
    // endpoint's home relay: fleetmesh nodes share their anchors' relays.
    const addr = new EndpointAddr(EndpointId.fromString(msg.id), msg.relay || endpoint.addr().relayUrl() || null, msg.addrs || [])
    p = endpoint.connect(addr, Array.from(Buffer.from(msg.alpn))).then((conn) => {
      track(conn, 'out')
      conn.closed().catch(() => {}).then(() => { if (outgoing.get(key) === p) outgoing.delete(key) })
      return conn
    })
    outgoing.set(key, p)
    p.catch(() => { if (outgoing.get(key) === p) outgoing.delete(key) })
  }
  return p
}

async function dial (msg) {
  if (!endpoint) return send({ t: 'dialerr', req: msg.req, err: 'endpoint not bound yet' })
  try {
    const conn = await connection(msg)
    let bi
    try {
      bi = await conn.openBi()
    } catch {
      // The cached connection died between uses: dial once more.
      outgoing.delete(msg.id + ' ' + msg.alpn)
      bi = await (await connection(msg)).openBi()
    }
    // A stream that fails on a cached connection (its peer restarted)
    // drops it, so the next dial connects afresh.
    pipe(bi, { t: 'stream', token, req: msg.req, alpn: msg.alpn, remote: msg.id }, () => {
      const key = msg.id + ' ' + msg.alpn
      const p = outgoing.get(key)
      if (p) {
        outgoing.delete(key)
        p.then((c) => c.close(0n, Array.from(Buffer.from('stream failed')))).catch(() => {})
      }
    })
  } catch (e) {
    send({ t: 'dialerr', req: msg.req, err: String(e.message || e).split('\n')[0] })
  }
}

// pipe joins one iroh bi-stream to a new socket connection to the node.
// A failure resets the iroh stream and closes the socket; onFail, if set,
// is told.
function pipe (bi, header, onFail) {
  const sock = net.createConnection({ path: sockPath, allowHalfOpen: true })
  let failed = false
  const fail = () => {
    if (failed) return
    failed = true
    if (onFail) onFail()
    bi.send.reset(0n).catch(() => {})
    bi.recv.stop(0n).catch(() => {})
    sock.destroy()
  }
  sock.on('error', fail)
  sock.write(JSON.stringify(header) + '\n')
  // iroh → node
  ;(async () => {
    for (;;) {
      const chunk = await bi.recv.read(chunkBytes)
      if (!chunk || chunk.length === 0) break
      if (!sock.write(Buffer.from(chunk))) await new Promise((resolve) => sock.once('drain', resolve))
    }
    sock.end()
  })().catch(fail)
  // node → iroh. What arrives while a write is in flight is coalesced into
  // the next write: protocols write many small frames, and one awaited
  // writeAll each costs a trip through the binding. Reading pauses while
  // more than maxPending bytes wait.
  let pending = []
  let pendingBytes = 0
  let writing = false
  let ended = false
  let finished = false
  const flush = async () => {
    if (writing || failed) return
    writing = true
    try {
      while (pending.length) {
        const buf = pending.length === 1 ? pending[0] : Buffer.concat(pending)
        pending = []
        pendingBytes = 0
        sock.resume()
        await bi.send.writeAll(Array.from(buf))
      }
      if (ended && !finished) {
        finished = true
        await bi.send.finish()
      }
    } catch {
      fail()
    } finally {
      writing = false
    }
    if (pending.length || (ended && !finished)) flush()
  }
  sock.on('data', (d) => {
    pending.push(d)
    pendingBytes += d.length
    if (pendingBytes > maxPending) sock.pause()
    flush()
  })
  sock.on('end', () => { ended = true; flush() })
}

async function shutdown () {
  if (endpoint) await endpoint.close().catch(() => {})
  process.exit(0)
}
