-- A workload with a known split: heavy does three times light's work, so a profiler sampling
-- by work (lua_timer --every) finds its innermost frame in heavy three times as often as in
-- light, and one sampling by CPU time about as often as the thread's own CPU clock
-- (thread_cpu_us, from the host program) measures. Each round's length is random (the split
-- stays 3:1), since a fixed period could fall into step with the sampling timer's.
spent_heavy, spent_light = 0, 0

local function heavy(n)
  local x = 0
  for i = 1, 3 * n do x = x + i % 7 end
  return x
end

local function light(n)
  local x = 0
  for i = 1, n do x = x + i % 7 end
  return x
end

local function round()
  local n = math.floor(10000 * (0.5 + math.random()))
  local t0 = thread_cpu_us()
  local x = heavy(n)
  local t1 = thread_cpu_us()
  x = x + light(n)
  spent_heavy = spent_heavy + (t1 - t0)
  spent_light = spent_light + (thread_cpu_us() - t1)
  return x
end

-- Until should_stop() says so, or `rounds` times when given (the benchmark's fixed work).
function run(rounds)
  local total = 0
  if rounds then
    for _ = 1, rounds do total = total + round() end
  else
    while not should_stop() do total = total + round() end
  end
  return total
end
