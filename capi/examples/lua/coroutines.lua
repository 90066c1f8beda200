-- Coroutines: a producer, a filter and a consumer joined by coroutine.wrap and
-- coroutine.resume, each doing some work of its own.
local function producer(n)
  return coroutine.wrap(function()
    for i = 1, n do
      local x = 0
      for k = 1, 40 do x = x + (i * k) % 7 end
      coroutine.yield(x)
    end
  end)
end

local function filter(source)
  return coroutine.create(function()
    for value in source do
      if value % 2 == 0 then coroutine.yield(value * 3) end
    end
  end)
end

local function consume(co)
  local sum = 0
  while true do
    local ok, value = coroutine.resume(co)
    if not ok or value == nil then break end
    sum = sum + value
  end
  return sum
end

local total = 0
for _ = 1, 8 do
  total = total + consume(filter(producer(30000)))
end
print("coroutines", total)
