-- String work: building text, pattern matching, substitution and formatting.
local function build_text(lines)
  local parts = {}
  for i = 1, lines do
    parts[#parts + 1] = string.format("line %d: the quick brown fox %s jumps over %d lazy dogs", i,
      string.rep("x", i % 13), i * 7)
  end
  return table.concat(parts, "\n")
end

local function count_words(text)
  local counts = {}
  for word in text:gmatch("%a+") do
    counts[word] = (counts[word] or 0) + 1
  end
  return counts
end

local function shout(text)
  return (text:gsub("(%a+)", function(w) return w:upper() end))
end

local function checksum(text)
  local sum = 0
  for i = 1, #text, 3 do sum = (sum + text:byte(i)) % 65521 end
  return sum
end

local total = 0
for _ = 1, 5 do
  local text = build_text(20000)
  local counts = count_words(text)
  total = total + counts.fox + checksum(shout(text))
end
print("strings", total)
