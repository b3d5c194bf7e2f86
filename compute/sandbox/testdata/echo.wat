;; echo: copies stdin to stdout, then exits 0. The plain case.
(module
  (import "wasi_snapshot_preview1" "fd_read" (func $fd_read (param i32 i32 i32 i32) (result i32)))
  (import "wasi_snapshot_preview1" "fd_write" (func $fd_write (param i32 i32 i32 i32) (result i32)))
  (memory (export "memory") 1)
  (func (export "_start")
    (local $n i32)
    (loop $again
      ;; iovec at 0: buffer at 64, 4096 bytes
      (i32.store (i32.const 0) (i32.const 64))
      (i32.store (i32.const 4) (i32.const 4096))
      (drop (call $fd_read (i32.const 0) (i32.const 0) (i32.const 1) (i32.const 8)))
      (local.set $n (i32.load (i32.const 8)))
      (if (local.get $n)
        (then
          (i32.store (i32.const 4) (local.get $n))
          (drop (call $fd_write (i32.const 1) (i32.const 0) (i32.const 1) (i32.const 8)))
          (br $again))))))
