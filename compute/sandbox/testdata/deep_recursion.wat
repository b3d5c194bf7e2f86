;; hostile: unbounded recursion. Stops with the stack exhausted at the
;; job's call depth, at the same call on every engine.
(module
  (memory (export "memory") 1)
  (func $down (param $n i64) (result i64)
    (i64.add (call $down (i64.add (local.get $n) (i64.const 1))) (i64.const 1)))
  (func (export "_start")
    (drop (call $down (i64.const 0)))))
