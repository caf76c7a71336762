-- A model's batch queue on one account: one hash, KEYS[1] = {prefix}:{queue:<account>}:holds,
-- one field per hold (the lease id), valued "<tokens>:<expiry ms>". Expiries are on the
-- script's clock: Redis TIME in unix ms, or the caller's ms when ARGV[3] gives one (a test's
-- paused clock). Every hold and adopt first drops the fields that have expired, and leaves
-- the key to expire with its longest hold. Token counts arrive as decimal strings and are
-- stored as they came; sums are Lua numbers (exact below 2^53).
--
-- hold:    ARGV[1] = "hold", ARGV[2] = lease, ARGV[3] = now in ms ("" = Redis TIME),
--          ARGV[4] = tokens, ARGV[5] = ttl in ms, ARGV[6] = tokens cap ("" = unlimited),
--          ARGV[7] = batches cap ("" = unlimited)
--          -> {"held"} (placed now, or already there), or
--             {"full", held tokens, held batches} when it does not fit beside the others
-- adopt:   ARGV[1] = "adopt", ARGV[2..5] as for hold: placed whatever the caps -> {"held"}
-- release: ARGV[1] = "release", ARGV[2] = lease -> {"released"}
if redis.replicate_commands then redis.replicate_commands() end
local key = KEYS[1]
local op = ARGV[1]
local lease = ARGV[2]

if op == 'release' then
  redis.call('HDEL', key, lease)
  return {'released'}
end
if op ~= 'hold' and op ~= 'adopt' then
  return redis.error_reply('unknown operation ' .. tostring(op))
end

local now
if ARGV[3] ~= '' then
  now = tonumber(ARGV[3])
else
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
local tokens = tonumber(ARGV[4])
local ttl = tonumber(ARGV[5])
if now == nil or tokens == nil or ttl == nil then
  return redis.error_reply('bad arguments')
end

-- The unexpired holds: their sum, their count, the latest expiry; a field that is not
-- "<tokens>:<expiry>" (written by something else) is dropped with the expired ones.
local held_tokens, held_batches, latest, present = 0, 0, now, false
local fields = redis.call('HGETALL', key)
for i = 1, #fields, 2 do
  local amount, expiry = string.match(fields[i + 1], '^(%d+):(%d+)$')
  amount, expiry = tonumber(amount), tonumber(expiry)
  if amount == nil or expiry == nil or expiry <= now then
    redis.call('HDEL', key, fields[i])
  else
    held_tokens = held_tokens + amount
    held_batches = held_batches + 1
    -- The lease's own expiry is left out of the latest: an adopt replaces it.
    if fields[i] == lease then
      present = true
    elseif expiry > latest then
      latest = expiry
    end
  end
end

if op == 'hold' then
  if present then
    return {'held'}
  end
  local tokens_cap, batches_cap = tonumber(ARGV[6]), tonumber(ARGV[7])
  local over_tokens = tokens_cap ~= nil and held_tokens + tokens > tokens_cap
  local over_batches = batches_cap ~= nil and held_batches + 1 > batches_cap
  if over_tokens or over_batches then
    return {'full', string.format('%.0f', held_tokens), tostring(held_batches)}
  end
end

local expiry = now + ttl
redis.call('HSET', key, lease, ARGV[4] .. ':' .. string.format('%.0f', expiry))
if expiry > latest then latest = expiry end
if latest > now then
  redis.call('PEXPIRE', key, string.format('%.0f', latest - now))
else
  redis.call('DEL', key)
end
return {'held'}
