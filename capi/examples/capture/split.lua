-- A workload with a known CPU split: heavy does three times light's work, so a time-based
-- profiler must find its innermost frame in heavy three times as often as in light.
local function heavy()
  local x = 0
  for i = 1, 30000 do x = x + i % 7 end
  return x
end

local function light()
  local x = 0
  for i = 1, 10000 do x = x + i % 7 end
  return x
end

-- Until should_stop() says so, or `rounds` times when given (the benchmark's fixed work).
function run(rounds)
  local total = 0
  if rounds then
    for _ = 1, rounds do total = total + heavy() + light() end
  else
    while not should_stop() do total = total + heavy() + light() end
  end
  return total
end
