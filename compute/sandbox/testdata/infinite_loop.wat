;; hostile: a loop that never ends. Stops out of fuel.
(module
  (memory (export "memory") 1)
  (func (export "_start")
    (loop $l (br $l))))
