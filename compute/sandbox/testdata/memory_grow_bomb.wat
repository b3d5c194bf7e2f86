;; hostile: grows memory one page at a time until growth fails, then
;; keeps asking. Stops out of memory at the job's page limit.
(module
  (memory (export "memory") 1)
  (func (export "_start")
    (loop $l
      (drop (memory.grow (i32.const 1)))
      (br $l))))
