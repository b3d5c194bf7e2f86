;; calls through a table, an element segment, a ref.func global and an
;; import: the metering pass adds an import, so every defined function's
;; index moves up by one; this prints "ACB" only if all were renumbered.
(module
  (import "wasi_snapshot_preview1" "fd_write" (func $fd_write (param i32 i32 i32 i32) (result i32)))
  (type $t (func (result i32)))
  (memory (export "memory") 1)
  (table $tab 3 funcref)
  (elem (i32.const 0) $a $b $c)
  (global $g funcref (ref.func $b))
  (func $a (result i32) (i32.const 65))
  (func $b (result i32) (i32.const 66))
  (func $c (result i32) (i32.const 67))
  (func (export "_start")
    (table.set $tab (i32.const 1) (global.get $g))
    (i32.store8 (i32.const 100) (call_indirect (type $t) (i32.const 0)))
    (i32.store8 (i32.const 101) (call_indirect (type $t) (i32.const 2)))
    (i32.store8 (i32.const 102) (call_indirect (type $t) (i32.const 1)))
    (i32.store (i32.const 0) (i32.const 100))
    (i32.store (i32.const 4) (i32.const 3))
    (drop (call $fd_write (i32.const 1) (i32.const 0) (i32.const 1) (i32.const 8)))))
