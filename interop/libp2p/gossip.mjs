// A js-libp2p node (libp2p 3, TCP, Noise, yamux, identify, gossipsub) that
// joins a fleetmesh author-shard topic, driven by mesh's Go interop test.
//
// usage: node gossip.mjs <go multiaddr with /p2p/> <topic> <event json>
//
// It dials the Go node, subscribes to <topic>, and once the Go node is
// subscribed too, re-encodes <event json> canonically with JSON.stringify
// (keys in NIP-01 order) and publishes it. Every message it receives on the
// topic is printed as "RECEIVED <data>". It prints "SUBSCRIBED" when the Go node is
// in its GossipSub mesh for the topic and "PUBLISHED <id>" after publishing. It exits
// when stdin closes.
// js-libp2p 3 uses Promise.withResolvers (ES2024, Node 22); Node 20 is what
// this machine has, so add it before loading libp2p. It is the standard
// definition: a promise with its resolve and reject functions.
if (typeof Promise.withResolvers !== 'function') {
  Promise.withResolvers = function withResolvers () {
    let resolve, reject
    const promise = new this((res, rej) => { resolve = res; reject = rej })
    return { promise, resolve, reject }
  }
}
const { createLibp2p } = await import('libp2p')
const { tcp } = await import('@libp2p/tcp')
const { noise } = await import('@chainsafe/libp2p-noise')
const { yamux } = await import('@chainsafe/libp2p-yamux')
const { identify } = await import('@libp2p/identify')
const { gossipsub } = await import('@libp2p/gossipsub')
const { multiaddr } = await import('@multiformats/multiaddr')
const { createHash } = await import('node:crypto')

const [goAddr, topic, eventJSON] = process.argv.slice(2)
if (!goAddr || !topic || !eventJSON) {
  console.error('usage: node gossip.mjs <go multiaddr> <topic> <event json>')
  process.exit(2)
}

const node = await createLibp2p({
  addresses: { listen: [] },
  transports: [tcp()],
  connectionEncrypters: [noise()],
  streamMuxers: [yamux()],
  services: {
    identify: identify(),
    pubsub: gossipsub({
      // spec/mesh-topics.md: no author, no signature; id = SHA-256(data).
      globalSignaturePolicy: 'StrictNoSign',
      msgIdFn: (msg) => new Uint8Array(createHash('sha256').update(msg.data).digest()),
      emitSelf: false
    })
  }
})

const pubsub = node.services.pubsub
const decoder = new TextDecoder()
pubsub.addEventListener('message', (evt) => {
  if (evt.detail.topic !== topic) return
  console.log('RECEIVED ' + decoder.decode(evt.detail.data))
})
pubsub.subscribe(topic)

const target = multiaddr(goAddr)
await node.dial(target)
const goPeer = target.getComponents().find((c) => c.name === 'p2p').value

const deadline = Date.now() + 30000
// Publish only once the Go node is in our GossipSub mesh for the topic:
// then both sides have each other's subscriptions and streams, and neither
// drops the other's first messages as coming from an unknown peer.
while (!pubsub.getMeshPeers(topic).includes(goPeer)) {
  if (Date.now() > deadline) {
    console.error('the Go node never subscribed to ' + topic)
    process.exit(1)
  }
  await new Promise((resolve) => setTimeout(resolve, 50))
}
console.log('SUBSCRIBED')

const ev = JSON.parse(eventJSON)
const canonical = JSON.stringify({
  id: ev.id,
  pubkey: ev.pubkey,
  created_at: ev.created_at,
  kind: ev.kind,
  tags: ev.tags,
  content: ev.content,
  sig: ev.sig
})
await pubsub.publish(topic, new TextEncoder().encode(canonical))
console.log('PUBLISHED ' + ev.id)

process.stdin.resume()
process.stdin.on('end', async () => {
  await node.stop()
  process.exit(0)
})
