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
//
// Each stream costs the node a file descriptor, so the helper bounds what
// remote endpoints open (the node's "limits", spec/limits.md): inbound
// connections in all and per endpoint, streams in all (both ways) and
// inbound streams per endpoint and per endpoint and ALPN. Over a bound a
// connection is closed and a stream reset, and the node is told
// ("refused", gathered per endpoint and reason) so that it scores the
// endpoint down; an endpoint the node bans ("ban") is refused outright.
//
// `node helper.mjs --check` loads the binding and exits: it prints one JSON
// line, {"ok":true,"node","platform"} or {"ok":false,"why"}, and exits 3 when
// the binding cannot run here. The node runs it before it starts the helper
// (iroh.Check), so a missing or foreign binding is reported once, with its
// cause, instead of as a helper that dies at every start.
import net from 'node:net'
import readline from 'node:readline'

// The platforms @number0/iroh 1.1.0 has a native binding for on the npm
// registry (its package.json names more, which the registry does not
// serve), and the oldest Node.js its engines field accepts.
const boundPlatforms = ['linux-x64', 'darwin-arm64']
const minNode = [20, 3]

// loadIroh imports the binding, or throws an Error whose message is the
// cause and the fix.
async function loadIroh () {
  const [major, minor] = process.versions.node.split('.').map(Number)
  if (major < minNode[0] || (major === minNode[0] && minor < minNode[1])) {
    throw new Error(`Node.js ${process.versions.node} is too old: @number0/iroh needs Node.js ${minNode.join('.')} or later`)
  }
  const platform = process.platform + '-' + process.arch
  try {
    return await import('@number0/iroh')
  } catch (e) {
    if (e.code === 'ERR_MODULE_NOT_FOUND' && String(e.message).includes("'@number0/iroh'")) {
      throw new Error(`@number0/iroh is not installed in ${process.cwd()} (run \`npm install --no-save\` there)`)
    }
    if (!boundPlatforms.includes(platform)) {
      throw new Error(`@number0/iroh has no native binding for ${platform} (the npm registry serves ${boundPlatforms.join(' and ')} only)`)
    }
    // The binding's loader chains what it tried; the head is the
    // platform package's error.
    const cause = e.cause || e
    const first = String(cause.message || cause).split('\n')[0]
    throw new Error(`the native binding of @number0/iroh does not load on ${platform}: ${first} (run \`npm install --no-save\` in ${process.cwd()})`)
  }
}

let iroh
try {
  iroh = await loadIroh()
} catch (e) {
  if (process.argv[2] === '--check') {
    console.log(JSON.stringify({ ok: false, why: e.message }))
  } else {
    console.error('fleetmesh iroh helper: ' + e.message)
  }
  process.exit(3)
}
if (process.argv[2] === '--check') {
  console.log(JSON.stringify({ ok: true, node: process.versions.node, platform: process.platform + '-' + process.arch }))
  process.exit(0)
}
const { Endpoint, EndpointAddr, EndpointId, RelayMode } = iroh

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
// How often refusals are reported, and the most endpoints held between
// two reports.
const refusedMs = 500
const maxRefusing = 1024
// The most banned endpoints remembered.
const maxBanned = 4096
// QUIC application error code of a refused connection or stream.
const refusedCode = 429n

let endpoint = null
let relays = new Set()
let alpns = new Set()
let nextConn = 1
// Outgoing connections, reused per remote and ALPN: iroh connections are
// per ALPN, and a QUIC connection carries many bi-streams.
const outgoing = new Map()

// The bounds (the node's config replaces them) and what counts against
// them.
let limits = { streams: 256, streams_per_peer: 16, streams_per_protocol: 8, conns: 1024, conns_per_peer: 8 }
let openStreams = 0
let inConns = 0
const peerConns = new Map() // remote -> inbound connections
const peerStreams = new Map() // remote -> inbound streams
const protoStreams = new Map() // remote + ' ' + alpn -> inbound streams
const inbound = new Map() // remote -> Set of inbound connections
const banned = new Map() // remote -> until (ms since the epoch)
const refusing = new Map() // remote -> Map(reason -> count)

function add (m, k, d) {
  const n = (m.get(k) || 0) + d
  if (n <= 0) m.delete(k); else m.set(k, n)
}

function isBanned (remote) {
  const until = banned.get(remote)
  if (until === undefined) return false
  if (Date.now() < until) return true
  banned.delete(remote)
  return false
}

// refuse gathers a refusal for the next report.
function refuse (remote, why) {
  let r = refusing.get(remote)
  if (!r) { r = new Map(); refusing.set(remote, r) }
  add(r, why, 1)
  if (refusing.size >= maxRefusing) reportRefused()
}

function reportRefused () {
  for (const [remote, r] of refusing) {
    for (const [why, n] of r) send({ t: 'refused', remote, why, n })
  }
  refusing.clear()
}

function ban (id, until) {
  if (banned.size >= maxBanned && !banned.has(id)) banned.delete(banned.keys().next().value)
  banned.set(id, until)
  for (const conn of inbound.get(id) || []) conn.close(refusedCode, Array.from(Buffer.from('banned')))
  for (const [key, p] of outgoing) {
    if (key.startsWith(id + ' ')) {
      outgoing.delete(key)
      p.then((c) => c.close(refusedCode, Array.from(Buffer.from('banned')))).catch(() => {})
    }
  }
}

// streamRefusal says why an inbound stream of remote on alpn is over a
// bound, or ''.
function streamRefusal (remote, alpn) {
  if (openStreams >= limits.streams) return 'streams'
  if ((peerStreams.get(remote) || 0) >= limits.streams_per_peer) return 'peer_streams'
  if ((protoStreams.get(remote + ' ' + alpn) || 0) >= limits.streams_per_protocol) return 'protocol_streams'
  return ''
}

const control = net.createConnection(sockPath)
control.on('error', (e) => fatal('control socket: ' + e.message))
control.on('close', () => fatal('the node closed the control socket'))
send({ t: 'control', token })

function send (msg) { control.write(JSON.stringify(msg) + '\n') }

// fatal writes why the helper exits, as one line (the node takes the last
// line of its standard error as the cause), and exits.
function fatal (why) {
  console.error('fleetmesh iroh helper: ' + why)
  process.exit(1)
}

// oneLine is an error of the binding as one line: its message and causes,
// without the backtrace and the Rust source locations the binding appends.
function oneLine (e) {
  const parts = []
  for (const l of String(e.message || e).split('\n')) {
    const t = l.trim()
    if (t.startsWith('Stack backtrace:')) break
    if (t === '' || t === 'Caused by:') continue
    parts.push(t.replace(/\s*\([^()]*\.rs:\d+:\d+\)/g, '').replace(/^\d+:\s*/, ''))
  }
  return parts.join(': ')
}

const lines = readline.createInterface({ input: control, crlfDelay: Infinity })
lines.on('line', (line) => {
  if (line.length > maxLineBytes) return fatal('control line too long')
  let msg
  try { msg = JSON.parse(line) } catch (e) { return fatal('control line is not JSON: ' + e.message) }
  if (msg.t === 'config') return configure(msg).catch((e) => fatal('bind: ' + oneLine(e)))
  if (msg.t === 'dial') return dial(msg)
  if (msg.t === 'relays') return setRelays(msg.relays || []).catch((e) => send({ t: 'error', err: 'relays: ' + e.message }))
  if (msg.t === 'ban') return ban(msg.id, msg.until)
  if (msg.t === 'close') return shutdown()
  send({ t: 'error', err: 'unknown control message ' + JSON.stringify(msg.t) })
})

async function configure (msg) {
  if (msg.limits) limits = msg.limits
  setInterval(reportRefused, refusedMs).unref()
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
    // Handshakes count against the bound: its remote is not known yet.
    if (inConns >= limits.conns) {
      inc.refuse().catch(() => {})
      refuse('', 'conns')
      continue
    }
    inConns++
    ;(async () => {
      let conn
      try {
        conn = await (await inc.accept()).connect()
      } catch {
        inConns--
        return
      }
      serveConn(conn)
    })().catch(() => {})
  }
}

// serveConn takes an inbound connection, if it is within the bounds, and
// pipes each stream it opens to the node, if that is.
function serveConn (conn) {
  const alpn = Buffer.from(conn.alpn()).toString()
  const remote = conn.remoteId().toString()
  const close = (why) => {
    inConns--
    conn.close(refusedCode, Array.from(Buffer.from(why)))
  }
  if (!alpns.has(alpn)) return close('unknown alpn')
  if (isBanned(remote)) {
    refuse(remote, 'banned')
    return close('banned')
  }
  if ((peerConns.get(remote) || 0) >= limits.conns_per_peer) {
    refuse(remote, 'peer_conns')
    return close('too many connections')
  }
  add(peerConns, remote, 1)
  let set = inbound.get(remote)
  if (!set) { set = new Set(); inbound.set(remote, set) }
  set.add(conn)
  // QUIC's own credit: the peer cannot open more streams at once on this
  // connection (one ALPN) than its share.
  try { conn.setMaxConcurrentBiStreams(BigInt(limits.streams_per_protocol)) } catch {}
  track(conn, 'in')
  conn.closed().catch(() => {}).then(() => {
    inConns--
    add(peerConns, remote, -1)
    set.delete(conn)
    if (set.size === 0 && inbound.get(remote) === set) inbound.delete(remote)
  })
  ;(async () => {
    for (;;) {
      let bi
      try { bi = await conn.acceptBi() } catch { return }
      if (isBanned(remote)) {
        refuse(remote, 'banned')
        conn.close(refusedCode, Array.from(Buffer.from('banned')))
        return
      }
      const why = streamRefusal(remote, alpn)
      if (why) {
        refuse(remote, why)
        bi.send.reset(refusedCode).catch(() => {})
        bi.recv.stop(refusedCode).catch(() => {})
        continue
      }
      const key = remote + ' ' + alpn
      add(peerStreams, remote, 1)
      add(protoStreams, key, 1)
      pipe(bi, { t: 'stream', token, req: 0, alpn, remote }, null, () => {
        add(peerStreams, remote, -1)
        add(protoStreams, key, -1)
      })
    }
  })().catch(() => {})
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
  if (openStreams >= limits.streams) return send({ t: 'dialerr', req: msg.req, err: 'the node\'s iroh streams are at their bound' })
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
// is told. The stream counts against limits.streams until the socket
// closes; onDone, if set, is told then.
function pipe (bi, header, onFail, onDone) {
  const sock = net.createConnection({ path: sockPath, allowHalfOpen: true })
  openStreams++
  sock.once('close', () => {
    openStreams--
    if (onDone) onDone()
  })
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
