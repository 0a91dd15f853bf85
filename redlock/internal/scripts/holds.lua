-- The holds of a lock's value, pasted where --[[holds.lua]] stands.
--
-- A value is token .. "\0" .. holds .. "\0" .. metadata. holds lists the
-- holds on the key, one per Lock handle, separated by spaces: each is the
-- handle's hold id, followed by ":" and its fence once the handle's fence
-- write-back reached this node. Hold ids never hold " ", ":" or "\0". A
-- handle acts only on its own hold: another Lock with the same token
-- (a re-entry, a reclaim) has a hold of its own, which a release, a
-- cooldown or an extension of this one never touches.

-- holdsOf returns the holds of value v and what follows them ("\0" ..
-- metadata) when v starts with prefix (token .. "\0"), else nil.
local function holdsOf(v, prefix)
  if not v or string.sub(v, 1, #prefix) ~= prefix then
    return nil
  end
  local i = string.find(v, '\0', #prefix + 1, true)
  if not i then
    return nil
  end
  return string.sub(v, #prefix + 1, i - 1), string.sub(v, i)
end

-- findHold returns where hold id's entry starts and ends in holds, or nil.
local function findHold(holds, id)
  local from = 1
  while true do
    local s, e = string.find(holds, id, from, true)
    if not s then
      return nil
    end
    local after = string.sub(holds, e + 1, e + 1)
    if (s == 1 or string.sub(holds, s - 1, s - 1) == ' ') and (after == '' or after == ' ' or after == ':') then
      local sp = string.find(holds, ' ', e + 1, true)
      return s, (sp and sp - 1 or #holds)
    end
    from = e + 1
  end
end

-- dropHold returns holds without the entry from s to e.
local function dropHold(holds, s, e)
  local before, after = string.sub(holds, 1, s - 1), string.sub(holds, e + 2)
  if after == '' then
    return string.sub(before, 1, -2)
  end
  return before .. after
end
