// The home node's relay URL, from the address that served the app. Its
// own module so the first screen (main.jsx) can show it without loading
// the relay client (relay.js and nostr-tools' negentropy).

// homeRelayURL is the relay of the node that served the app: the same
// origin over WebSocket.
export function homeRelayURL(loc) {
  const u = new URL('/', loc);
  u.protocol = u.protocol === 'https:' ? 'wss:' : 'ws:';
  return u.href;
}
