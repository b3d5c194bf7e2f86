// The service worker: keeps the app shell in a cache named for the build
// (SHELL_VERSION, set by build.mjs) so the app opens offline, and flushes
// the outbox on Background Sync where the browser has it.
import { flush } from './outbox.js';
import { homeRelayURL } from './home.js';
import { RelayConn } from './relay.js';

/* global SHELL_VERSION, SHELL_FILES */
const CACHE = `fleetmesh-shell-${SHELL_VERSION}`;

self.addEventListener('install', (e) => {
  e.waitUntil(caches.open(CACHE).then((c) => c.addAll(SHELL_FILES)).then(() => self.skipWaiting()));
});

self.addEventListener('activate', (e) => {
  e.waitUntil((async () => {
    for (const k of await caches.keys()) if (k.startsWith('fleetmesh-shell-') && k !== CACHE) await caches.delete(k);
    await self.clients.claim();
  })());
});

// The shell is served from the cache (the network when it lacks a file);
// node.json and everything else go to the network.
self.addEventListener('fetch', (e) => {
  const url = new URL(e.request.url);
  if (e.request.method !== 'GET' || url.origin !== location.origin) return;
  const scope = new URL(self.registration.scope);
  if (!url.pathname.startsWith(scope.pathname) || url.pathname.endsWith('/node.json')) return;
  e.respondWith((async () => {
    const hit = await caches.match(url.pathname === scope.pathname ? './' : e.request, { ignoreSearch: true });
    return hit || fetch(e.request);
  })());
});

self.addEventListener('sync', (e) => {
  if (e.tag !== 'outbox') return;
  e.waitUntil((async () => {
    const conn = new RelayConn(homeRelayURL(self.location));
    try {
      await flush(conn);
    } finally {
      conn.close();
    }
  })());
});
