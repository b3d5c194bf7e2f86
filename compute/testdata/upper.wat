;; upper: a WASI command that reads its input on stdin (at most 64 KiB)
;; and writes it on stdout with ASCII lower-case letters made upper-case.
;; If the input starts with "spin N " (N decimal), it first runs an empty
;; loop N times: the jobs of a chosen length that the tests and the
;; benchmark need.
(module
  (import "wasi_snapshot_preview1" "fd_read" (func $fd_read (param i32 i32 i32 i32) (result i32)))
  (import "wasi_snapshot_preview1" "fd_write" (func $fd_write (param i32 i32 i32 i32) (result i32)))
  (memory (export "memory") 2)
  (func $main (export "_start")
    (local $n i32) (local $total i32) (local $i i32) (local $c i32) (local $spin i64)
    ;; read stdin into [1024, 1024+65536)
    (block $done
      (loop $read
        (i32.store (i32.const 0) (i32.add (i32.const 1024) (local.get $total)))
        (i32.store (i32.const 4) (i32.sub (i32.const 65536) (local.get $total)))
        (drop (call $fd_read (i32.const 0) (i32.const 0) (i32.const 1) (i32.const 16)))
        (local.set $n (i32.load (i32.const 16)))
        (br_if $done (i32.eqz (local.get $n)))
        (local.set $total (i32.add (local.get $total) (local.get $n)))
        (br_if $done (i32.ge_u (local.get $total) (i32.const 65536)))
        (br $read)))
    ;; "spin N ": parse N, then loop N times
    (if (i32.and (i32.ge_u (local.get $total) (i32.const 5))
                 (i32.eq (i32.load (i32.const 1024)) (i32.const 0x6e697073))) ;; "spin" little-endian
      (then
        (local.set $i (i32.const 5))
        (block $num
          (loop $digit
            (br_if $num (i32.ge_u (local.get $i) (local.get $total)))
            (local.set $c (i32.load8_u (i32.add (i32.const 1024) (local.get $i))))
            (br_if $num (i32.or (i32.lt_u (local.get $c) (i32.const 48)) (i32.gt_u (local.get $c) (i32.const 57))))
            (local.set $spin (i64.add (i64.mul (local.get $spin) (i64.const 10)) (i64.extend_i32_u (i32.sub (local.get $c) (i32.const 48)))))
            (local.set $i (i32.add (local.get $i) (i32.const 1)))
            (br $digit)))
        (block $spun
          (loop $spinning
            (br_if $spun (i64.eqz (local.get $spin)))
            (local.set $spin (i64.sub (local.get $spin) (i64.const 1)))
            (br $spinning)))))
    ;; upper-case in place
    (local.set $i (i32.const 0))
    (block $end
      (loop $up
        (br_if $end (i32.ge_u (local.get $i) (local.get $total)))
        (local.set $c (i32.load8_u (i32.add (i32.const 1024) (local.get $i))))
        (if (i32.and (i32.ge_u (local.get $c) (i32.const 97)) (i32.le_u (local.get $c) (i32.const 122)))
          (then (i32.store8 (i32.add (i32.const 1024) (local.get $i)) (i32.sub (local.get $c) (i32.const 32)))))
        (local.set $i (i32.add (local.get $i) (i32.const 1)))
        (br $up)))
    ;; write it out
    (i32.store (i32.const 0) (i32.const 1024))
    (i32.store (i32.const 4) (local.get $total))
    (drop (call $fd_write (i32.const 1) (i32.const 0) (i32.const 1) (i32.const 16)))))
