-- A shared spend cap's account: one hash per cap, KEYS[1] = {prefix}:{spend:<cap>}:acct,
-- fields `spent` and `held` in whole nano-USD (integers, so no float drift across
-- processes). Amounts arrive as decimal integer strings and go to HINCRBY as they are.
--
-- hold:   ARGV[1] = "hold",   ARGV[2] = nanos to hold, ARGV[3] = the cap's limit in nanos,
--         ARGV[4] = the account's TTL in ms
--         -> {1, remaining after} when held, {0, remaining} when it does not fit
-- settle: ARGV[1] = "settle", ARGV[2] = -nanos held (to release), ARGV[3] = nanos spent,
--         ARGV[4] = TTL in ms, ARGV[5] = the settle's id (applied once), ARGV[6] = id TTL ms
--         -> {1, 0} applied, {2, 0} already applied
local key = KEYS[1]
local op = ARGV[1]
local ttl = tonumber(ARGV[4])
if op == 'hold' then
  local need = tonumber(ARGV[2])
  local limit = tonumber(ARGV[3])
  local spent = tonumber(redis.call('HGET', key, 'spent') or '0')
  local held = tonumber(redis.call('HGET', key, 'held') or '0')
  local remaining = limit - spent - held
  if need > remaining then
    return {0, remaining}
  end
  redis.call('HINCRBY', key, 'held', ARGV[2])
  redis.call('PEXPIRE', key, ttl)
  return {1, remaining - need}
elseif op == 'settle' then
  if redis.call('SET', key .. ':op:' .. ARGV[5], '1', 'NX', 'PX', ARGV[6]) == false then
    return {2, 0}
  end
  redis.call('HINCRBY', key, 'held', ARGV[2])
  redis.call('HINCRBY', key, 'spent', ARGV[3])
  if tonumber(redis.call('HGET', key, 'held')) < 0 then
    redis.call('HSET', key, 'held', '0')
  end
  redis.call('PEXPIRE', key, ttl)
  return {1, 0}
end
return redis.error_reply('unknown operation ' .. tostring(op))
