-- tollgate-redis: one model's buckets in one hash; every operation is one call.
--
-- KEYS[1]  the model's hash (tollgate:{model}:lim): per dimension its level in units, plus
--          ts (µs of the last update), f (throttle factor), fdec (µs of the last decrease),
--          fupd (µs of the last recovery step), pause (µs until which the model is paused),
--          per dimension hold:<name> (µs before which it does not refill: the arrival
--          allowance after a grant out of a full bucket), per dimension limit:<name> and
--          cap:<name> (a provider's limit below the catalog's, learned from its headers, and
--          the capacity that goes with it), grants, waited, grefuse (grants at the last 429),
--          per dimension tk:<name> (tokens booked by reservations so far, less those given
--          back unsent: a booking's place in line is this count just after it), ep (the
--          epoch: bumped, to a µs reading of the clock, whenever feedback slows the model,
--          and published on the channel KEYS[1]..':ep', so that a waiter holding a booked
--          slot knows to ask again at its start); for a fixed window (ARGV[13]) per
--          dimension turn:<name> (µs of a known turn of the window: nothing refills before
--          it, and the bucket is full at it and at every window after it), succ (successes
--          answered), succ429 (succ at the last measuring 429) and wrefuse (µs until which
--          the window that 429 measured lasts).
-- KEYS[2]  settle only: the operation's id key (same hash tag) so that a retried settle is
--          applied once; equal to KEYS[1] when there is none.
-- ARGV[1]  op: reserve | check | settle | feedback | snapshot
-- ARGV[2]  now in µs ("" = Redis TIME, the production clock)
-- ARGV[3]  reserve: the longest wait in µs the caller accepts (-1 = any); settle: the id
--          key's TTL in ms
-- ARGV[4]  reserve: the arrival allowance in µs (a grant out of a full bucket holds the
--          refill that long, as the in-process bucket does); feedback: the kind,
--          ok | 429 | again (a repeated 429) | 529 | pause | report; settle: 1 if it gives
--          back a reservation that was never sent (it leaves the line: tk:<name> drops too)
-- ARGV[5]  feedback: a pause in µs from now ("" = none), for any kind
-- ARGV[6]  report: the dimension's index (1-based)
-- ARGV[7]  report: the limit per minute the bucket is to have (the catalog's, or the
--          provider's when lower); "" = keep the one in force
-- ARGV[8]  report: the capacity in tokens that goes with that limit ("" likewise)
-- ARGV[9]  report: what the provider had left, in tokens ("" = it did not say)
-- ARGV[10] report: µs since the answer's request was sent (what was left is as of then)
-- ARGV[11] report: µs until the provider's bucket is full again ("" = it did not say): for
--          a fixed window, its turn
-- ARGV[12] 1 if the adaptive throttle is on
-- ARGV[13] 1 if the limits are fixed windows (`window = "fixed"`): a window is capacity /
--          limit minutes
-- ARGV[14] the burst in seconds (60: a full minute), to size a bucket at a limit the
--          script measures (a fixed window's 429)
-- ARGV[15] n, the number of dimensions; then n × (name, catalog capacity, catalog limit per
--          minute, amount); for check, the amount is the booking's tk:<name> just after it
--
-- A level is kept in units of 1/60_000_000 token, so that the refill per µs is exactly the
-- per-minute limit times the throttle factor: at full rate the arithmetic is exact integer
-- arithmetic on doubles (exact below 2^53).
--
-- Replies: reserve → {1, wait_us, now_us, factor in millionths, epoch, tk_1, …, tk_n} granted
-- (start after wait_us; tk_i: the booking's place in line), {0, wait_us, now_us, factor} not
-- within max_wait (nothing taken), {-1, i, capacity} dimension i can never fit;
-- check → {1, wait_us, now_us, factor, epoch}: a booking whose place in line is the tk_i
-- given may start after wait_us (0: now), by the buckets as they are now (nothing written);
-- settle → {1, 0, now_us} ({2, 0, now_us}: already applied); feedback → {1, 0, now_us, epoch};
-- snapshot → {level_1, …, level_n (strings, tokens), factor (string), grants, waited,
-- capacity_1, …, capacity_n (tokens)}.
if redis.replicate_commands then redis.replicate_commands() end
local UNITS = 60000000
local H = 15 -- ARGV before the dimensions
local function str(x) return string.format('%.17g', x) end
local key, op = KEYS[1], ARGV[1]
local now
if ARGV[2] == '' then
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000000 + tonumber(t[2])
else
  now = tonumber(ARGV[2])
end
local state = redis.call('HGETALL', key)
local h = {}
for i = 1, #state, 2 do h[state[i]] = state[i + 1] end
local last = tonumber(h['ts'] or now)
if now < last then now = last end -- never refill backwards (a failover to a slower clock)
local f = tonumber(h['f'] or '1')
local adaptive = ARGV[12] == '1'
local fixed = ARGV[13] == '1'
local burst_s = tonumber(ARGV[14])
local n = tonumber(ARGV[H])
local names, caps, limits, catalog, rates, amts, levels, holds = {}, {}, {}, {}, {}, {}, {}, {}
local turns = {}
-- A fixed window's length in µs: capacity / limit minutes (caps are in units).
local function window(i) return math.max(1, caps[i] / limits[i]) end
-- How many turns of dimension i's window have come by `t`.
local function turned_by(i, t)
  if t < turns[i] then return 0 end
  return math.floor((t - turns[i]) / window(i)) + 1
end
for i = 1, n do
  local b = H + (i - 1) * 4
  names[i] = ARGV[b + 1]
  catalog[i] = tonumber(ARGV[b + 3])
  limits[i] = catalog[i]
  caps[i] = tonumber(ARGV[b + 2]) * UNITS
  -- a provider's lower limit, learned from its headers by any process
  local learned = tonumber(h['limit:' .. names[i]] or '')
  if learned and learned < catalog[i] then
    limits[i] = learned
    caps[i] = tonumber(h['cap:' .. names[i]] or ARGV[b + 2]) * UNITS
  end
  rates[i] = math.max(limits[i] * f, 1e-9)
  amts[i] = tonumber(ARGV[b + 4]) * UNITS
  holds[i] = tonumber(h['hold:' .. names[i]] or '0')
  local lvl = tonumber(h[names[i]] or caps[i])
  turns[i] = fixed and tonumber(h['turn:' .. names[i]] or '') or nil
  if turns[i] then
    -- A fixed window whose turns are known: a window's worth at each, nothing between (the
    -- bookings beyond a window are taken from the next ones).
    local k = turned_by(i, now) - turned_by(i, last)
    if k > 0 then lvl = math.min(caps[i], lvl + k * caps[i]) end
  else
    local refilled = now - math.max(last, holds[i])
    if lvl < caps[i] and refilled > 0 then lvl = math.min(caps[i], lvl + refilled * rates[i]) end
  end
  if lvl > caps[i] then lvl = caps[i] end -- a smaller capacity than before
  levels[i] = lvl
end
local pause = tonumber(h['pause'] or '0')
local ep = tonumber(h['ep'] or '0')

-- µs until `deficit` units more than the level holds have refilled on dimension i.
local function wait_for(i, deficit)
  if turns[i] then
    local next_turn = turns[i] + turned_by(i, now) * window(i)
    return next_turn - now + (math.ceil(deficit / caps[i]) - 1) * window(i)
  end
  return math.ceil(deficit / rates[i]) + math.max(0, holds[i] - now)
end
local factor_micro = math.floor(f * 1000000 + 0.5)

if op == 'snapshot' then
  local out = {}
  for i = 1, n do out[i] = str(levels[i] / UNITS) end
  out[n + 1] = str(f)
  out[n + 2] = tonumber(h['grants'] or '0')
  out[n + 3] = tonumber(h['waited'] or '0')
  for i = 1, n do out[n + 3 + i] = caps[i] / UNITS end
  return out
end

if op == 'check' then
  -- A booking's turn comes when the level, less only the bookings made after it, is back
  -- to zero: its place in line does not move, whatever slowed the refill or paused the
  -- model since it booked. An absent hash is full buckets.
  local wait = 0
  if h['ts'] then
    for i = 1, n do
      local later = tonumber(h['tk:' .. names[i]] or '0') - tonumber(ARGV[H + (i - 1) * 4 + 4])
      local e = levels[i] + later * UNITS
      if e < -1 then -- within a unit (1/60e6 token) of zero: rounding, not a wait
        local w = wait_for(i, -e)
        if w > wait then wait = w end
      end
    end
    if pause - now > wait then wait = pause - now end
  end
  return {1, wait, now, factor_micro, ep}
end

-- The provider has seen a request: its bucket drains and refills from now on.
local function end_hold(i)
  if holds[i] > 0 then holds[i] = 0; redis.call('HDEL', key, 'hold:' .. names[i]) end
end

-- Dimension i at `limit` per minute with a bucket of `cap` units (after refilling at the
-- old rate): a smaller bucket keeps what was taken out of the larger one (never below zero
-- for it); a larger one keeps its level. Kept in the hash when below the catalog's.
local function set_limit(i, limit, cap)
  if cap < caps[i] and levels[i] > 0 then levels[i] = math.max(0, levels[i] - (caps[i] - cap)) end
  limits[i], caps[i] = limit, cap
  rates[i] = math.max(limit * f, 1e-9)
  if levels[i] > cap then levels[i] = cap end
  if limit < catalog[i] then
    redis.call('HSET', key, 'limit:' .. names[i], str(limit), 'cap:' .. names[i], str(cap / UNITS))
  else
    redis.call('HDEL', key, 'limit:' .. names[i], 'cap:' .. names[i])
  end
end

-- A fixed window with `tokens` left that turns at `at`: nothing more until then, and a
-- window's worth at every turn from then on.
local new_turn = false
local function hold_until_turn(i, tokens, at)
  if levels[i] > tokens * UNITS then levels[i] = tokens * UNITS end
  end_hold(i)
  new_turn = new_turn or turns[i] ~= math.max(at, now)
  turns[i] = math.max(at, now)
  redis.call('HSET', key, 'turn:' .. names[i], str(turns[i]))
end

local reply = {1, 0, now}
local lone = false
if op == 'reserve' then
  local wait = 0
  for i = 1, n do
    if amts[i] > caps[i] then return {-1, i, caps[i] / UNITS} end
    local deficit = amts[i] - levels[i]
    if deficit > 0 then
      local w = wait_for(i, deficit)
      if w > wait then wait = w end
    end
  end
  if pause - now > wait then wait = pause - now end
  local max_wait = tonumber(ARGV[3])
  if max_wait >= 0 and wait > max_wait then return {0, wait, now, factor_micro} end
  local allowance = tonumber(ARGV[4]) or 0
  for i = 1, n do
    -- Within the allowance's refill of full (as the in-process bucket): the provider's
    -- spills until the request arrives.
    if allowance > 0 and caps[i] - levels[i] < allowance * rates[i] and now + allowance > holds[i] then
      holds[i] = now + allowance
      redis.call('HSET', key, 'hold:' .. names[i], str(holds[i]))
    end
    levels[i] = levels[i] - amts[i]
  end
  redis.call('HINCRBY', key, 'grants', 1)
  if wait > 0 then redis.call('HINCRBY', key, 'waited', 1) end
  reply = {1, wait, now, factor_micro, ep}
  for i = 1, n do
    reply[5 + i] = redis.call('HINCRBY', key, 'tk:' .. names[i], ARGV[H + (i - 1) * 4 + 4])
  end
elseif op == 'settle' then
  if KEYS[2] ~= key then
    if not redis.call('SET', KEYS[2], '1', 'NX', 'PX', tonumber(ARGV[3])) then return {2, 0, now} end
  end
  -- amount > 0 takes more (debt), < 0 gives back, capped at capacity
  for i = 1, n do levels[i] = math.min(caps[i], levels[i] - amts[i]) end
  if ARGV[4] == '1' then
    for i = 1, n do redis.call('HINCRBY', key, 'tk:' .. names[i], ARGV[H + (i - 1) * 4 + 4]) end
  end
elseif op == 'feedback' then
  local kind = ARGV[4]
  local before_levels, before_rates, before_pause = {}, {}, pause
  for i = 1, n do before_levels[i], before_rates[i] = levels[i], rates[i] end
  if kind == 'report' then
    local i = tonumber(ARGV[6])
    -- "" = the report named no limit: the one in force is kept
    local limit, cap = tonumber(ARGV[7]), tonumber(ARGV[8] or '')
    if cap then cap = cap * UNITS end
    if limit and limit ~= limits[i] then set_limit(i, limit, cap) end
    if fixed and ARGV[9] ~= '' and ARGV[11] ~= '' then
      -- A fixed window that says when it turns: what is left is all there is until then.
      hold_until_turn(i, tonumber(ARGV[9]), now + tonumber(ARGV[11]))
    elseif ARGV[9] ~= '' then
      -- What was left when the request was sent, plus what has refilled since; every grant
      -- made since is already taken from the level once, and is not taken again.
      local sent_ago = math.max(0, tonumber(ARGV[10]) or 0)
      local target = math.min(caps[i], tonumber(ARGV[9]) * UNITS + sent_ago * rates[i])
      if target < levels[i] then levels[i] = target end
      end_hold(i)
    end
  elseif kind == '429' or kind == 'again' then
    -- A lone call (nothing but its own attempt granted since the last refusal): the
    -- provider's retry-after is exact, applied after the throttle below. Otherwise a first
    -- 429 leaves nothing on requests, the dimension every call spends. Either marks the
    -- last refusal, with or without a retry-after (as in process).
    local grants = tonumber(h['grants'] or '0')
    -- A fixed window's turn is what its 429 says (below), never one unit's refill.
    lone = not fixed and ARGV[5] ~= '' and grants - tonumber(h['grefuse'] or '0') <= 1
    redis.call('HSET', key, 'grefuse', tostring(grants))
    local wait = tonumber(ARGV[5]) or 0
    for i = 1, n do
      if names[i] == 'rpm' and fixed and kind == '429' and wait > 0 then
        -- The window turns `wait` from now. The first 429 of a window measures it: the
        -- successes answered since the previous one are what a window allows, and become
        -- the limit if lower; the other calls refused in that window measure nothing new.
        if now >= tonumber(h['wrefuse'] or '0') then
          local succ = tonumber(h['succ'] or '0')
          local allowed = succ - tonumber(h['succ429'] or '0')
          redis.call('HSET', key, 'wrefuse', str(now + wait), 'succ429', str(succ))
          local per_minute = math.floor(allowed * 60000000 / window(i))
          if allowed > 0 and per_minute < limits[i] then
            local limit = math.max(1, math.min(per_minute, catalog[i]))
            local cap = limit
            if burst_s < 60 then cap = math.max(1, math.floor(limit * burst_s / 60)) end
            set_limit(i, limit, cap * UNITS)
          end
        end
        hold_until_turn(i, 0, now + wait)
      elseif names[i] == 'rpm' then
        if kind == '429' and not lone and levels[i] > 0 then levels[i] = 0 end
        -- the provider has seen a request (a repeated 429 that is not exact changes nothing)
        if kind == '429' or lone then end_hold(i) end
      end
    end
  end
  if ARGV[5] ~= '' then
    local until_us = now + tonumber(ARGV[5])
    if until_us > pause then pause = until_us; redis.call('HSET', key, 'pause', str(pause)) end
  end
  if fixed and kind == 'ok' then redis.call('HINCRBY', key, 'succ', 1) end
  if adaptive and (kind == '429' or kind == '529' or kind == 'ok') then
    local fdec = tonumber(h['fdec'] or '-1e18')
    local nf = f
    if kind == '429' or kind == '529' then
      if now - fdec >= @HOLDOFF_US@ then
        local beta = (kind == '429') and @RATE_LIMITED_BETA@ or @OVERLOADED_BETA@
        nf = math.max(@MIN_RATE_FACTOR@, f * beta)
        redis.call('HSET', key, 'fdec', str(now), 'fupd', str(now))
      end
    elseif f < 1 then
      local from = math.max(tonumber(h['fupd'] or now), fdec + @RECOVERY_US@)
      if now > from then
        local step = math.min(1, @APPROACH_PER_SECOND@ * (now - from) / 1000000)
        nf = f + (1 - f) * step
        if nf > 0.999 then nf = 1 end
        redis.call('HSET', key, 'fupd', str(now))
      end
    end
    if nf ~= f then redis.call('HSET', key, 'f', str(nf)); f = nf end
  end
  if lone then
    -- One unit has refilled exactly at the end of the pause, at the rate now in force.
    for i = 1, n do
      if names[i] == 'rpm' then levels[i] = UNITS - tonumber(ARGV[5]) * math.max(limits[i] * f, 1e-9) end
    end
  end
  -- Slower than before (a later pause, a lower level, a slower refill): the slots booked
  -- so far were reckoned on what no longer holds. A new epoch tells their waiters to ask
  -- again at their start (`check`); published, so that other processes learn it too.
  local slowed = pause > before_pause or new_turn
  for i = 1, n do
    if levels[i] < before_levels[i] or math.max(limits[i] * f, 1e-9) < before_rates[i] then slowed = true end
  end
  if slowed then
    ep = math.max(ep + 1, now)
    redis.call('HSET', key, 'ep', str(ep))
    redis.call('PUBLISH', key .. ':ep', str(ep))
  end
  reply = {1, 0, now, ep}
end

local ttl = 1000
local learned = false
for i = 1, n do
  redis.call('HSET', key, names[i], str(levels[i]))
  if levels[i] < caps[i] then
    local full = math.ceil(wait_for(i, caps[i] - levels[i]) / 1000)
    if full > ttl then ttl = full end
  end
  if limits[i] < catalog[i] then learned = true end
end
if pause > now and math.ceil((pause - now) / 1000) > ttl then ttl = math.ceil((pause - now) / 1000) end
-- a learned limit outlives full buckets for a while: an absent key is the catalog's limit
if learned and ttl < @LEARNED_LIMIT_TTL_MS@ then ttl = @LEARNED_LIMIT_TTL_MS@ end
redis.call('HSET', key, 'ts', str(now))
-- idle buckets expire once full again (expiry = full, at factor 1)
redis.call('PEXPIRE', key, ttl + 1000)
return reply
