;; hostile: float operations whose NaN bits the spec leaves open (0/0,
;; sqrt(-1), inf-inf, NaN payload propagation, min/max, promote/demote),
;; written out bit for bit. Metering canonicalises them, so every engine
;; and CPU prints the same bytes.
(module
  (import "wasi_snapshot_preview1" "fd_write" (func $fd_write (param i32 i32 i32 i32) (result i32)))
  (memory (export "memory") 1)
  (func (export "_start")
    (local $z f64)
    (local $p f64)
    (local.set $p (f64.reinterpret_i64 (i64.const 0x7ff4000000000123)))
    (f64.store (i32.const 100) (f64.div (local.get $z) (local.get $z)))
    (f64.store (i32.const 108) (f64.sqrt (f64.const -1)))
    (f64.store (i32.const 116) (f64.sub (f64.const inf) (f64.const inf)))
    (f64.store (i32.const 124) (f64.add (local.get $p) (f64.const 1)))
    (f64.store (i32.const 132) (f64.mul (local.get $p) (f64.neg (local.get $p))))
    (f64.store (i32.const 140) (f64.min (local.get $p) (f64.const 2)))
    (f64.store (i32.const 148) (f64.max (f64.const nan:0x8000000000001) (local.get $p)))
    (f32.store (i32.const 156) (f32.demote_f64 (local.get $p)))
    (f64.store (i32.const 160) (f64.promote_f32 (f32.const nan:0x200001)))
    (f32.store (i32.const 168) (f32.div (f32.const 0) (f32.const 0)))
    (f64.store (i32.const 172) (f64.nearest (local.get $p)))
    (f64.store (i32.const 180) (f64.sub (f64.const -nan:0x123) (f64.const nan:0x456)))
    (i32.store (i32.const 0) (i32.const 100))
    (i32.store (i32.const 4) (i32.const 88))
    (drop (call $fd_write (i32.const 1) (i32.const 0) (i32.const 1) (i32.const 8)))))
