-- Recursion: naive Fibonacci, the Ackermann function and a binary tree built and walked.
local function fib(n)
  if n < 2 then return n end
  return fib(n - 1) + fib(n - 2)
end

local function ackermann(m, n)
  if m == 0 then return n + 1 end
  if n == 0 then return ackermann(m - 1, 1) end
  return ackermann(m - 1, ackermann(m, n - 1))
end

local function make_tree(depth)
  if depth == 0 then return { value = 1 } end
  return { left = make_tree(depth - 1), right = make_tree(depth - 1), value = depth }
end

local function tree_sum(node)
  if node.left == nil then return node.value end
  return node.value + tree_sum(node.left) + tree_sum(node.right)
end

local total = fib(27) + ackermann(2, 300)
for _ = 1, 6 do
  total = total + tree_sum(make_tree(14))
end
print("recursion", total)
