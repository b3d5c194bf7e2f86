// Builds the browser leaf into dist/ (served by every node at /app/ from
// the binary: package web). Deterministic: the same sources and lock file
// give the same bytes, so CI rebuilds dist/ and fails when it differs from
// the committed one (scripts/test.sh).
//
//   node build.mjs        (npm run build)
//
// app.js is the page (with the chunks it loads); sw.js the service worker,
// whose cache name carries a hash of the shell it caches, so a new build
// replaces the old cache.
import * as esbuild from 'esbuild';
import { createHash } from 'node:crypto';
import { mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { relative } from 'node:path';

const out = 'dist';
rmSync(out, { recursive: true, force: true });
mkdirSync(out, { recursive: true });

const common = {
  bundle: true,
  minify: true,
  format: 'esm',
  target: ['chrome120', 'firefox120', 'safari17'],
  legalComments: 'none',
  charset: 'utf8',
  jsx: 'automatic',
  jsxImportSource: 'preact',
  logLevel: 'warning',
  write: false,
  // nostr-tools 2.25.2 builds nip77 but its package exports map omits it
  // (only its index re-exports it, which would pull in every NIP).
  alias: { 'nostr-tools/nip77': './node_modules/nostr-tools/lib/esm/nip77.js' },
};

// The page is split (esbuild's ESM splitting): app.js holds only what the
// first screen of the cached feed needs (Preact, idb, the store, the
// views); live.js (the keys, the home connection, the leaf) and what the
// two share are chunks app.js loads, named by content hash
// (spec/web.md "First screen").
const app = await esbuild.build({
  ...common,
  entryPoints: { app: 'src/app/main.jsx' },
  outdir: out,
  splitting: true,
  chunkNames: '[name]-[hash]',
  metafile: true,
});
const files = {};
for (const f of app.outputFiles) files[relative(out, f.path)] = f.contents;
// The chunks app.js imports statically are preloaded with it, so the
// first screen does not wait for one fetch after another.
const entry = app.metafile.outputs[`${out}/app.js`];
const preload = entry.imports.filter((i) => i.kind === 'import-statement').map((i) => relative(out, i.path)).sort();
for (const f of ['app.css', 'manifest.webmanifest', 'icon.svg']) {
  files[f] = readFileSync(`src/app/${f}`);
}
const script = '<script type="module" src="app.js"></script>';
const html = readFileSync('src/app/index.html', 'utf8');
if (!html.includes(script)) throw new Error(`src/app/index.html must load the app with ${script}`);
files['index.html'] = Buffer.from(html.replace(script, [...preload.map((p) => `<link rel="modulepreload" href="${p}">`), script].join('\n')));
const shell = createHash('sha256');
for (const name of Object.keys(files).sort()) {
  shell.update(name).update('\0').update(files[name]).update('\0');
}
const version = shell.digest('hex').slice(0, 16);
const sw = await esbuild.build({
  ...common,
  entryPoints: ['src/app/sw.js'],
  outfile: `${out}/sw.js`,
  define: { SHELL_VERSION: JSON.stringify(version), SHELL_FILES: JSON.stringify(['./', ...Object.keys(files).filter((f) => f !== 'index.html').sort()]) },
});
files['sw.js'] = sw.outputFiles[0].contents;
for (const [name, body] of Object.entries(files)) {
  writeFileSync(`${out}/${name}`, body);
}
console.log(`built ${Object.keys(files).length} files into ${out}/, shell ${version}`);
