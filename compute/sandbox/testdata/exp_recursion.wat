;; hostile: exponential recursion with no loop anywhere (2^64 calls).
;; Bounded depth, unbounded work: stops out of fuel, not by the stack.
(module
  (memory (export "memory") 1)
  (func $f (param $n i32) (result i32)
    (if (result i32) (i32.eqz (local.get $n))
      (then (i32.const 1))
      (else (i32.add
        (call $f (i32.sub (local.get $n) (i32.const 1)))
        (call $f (i32.sub (local.get $n) (i32.const 1)))))))
  (func (export "_start")
    (drop (call $f (i32.const 64)))))
