-- wrk script: GET one path after another from a list, each thread from its own shuffled order.
-- The list is a file of one path per line, named by the environment variable PATHS_FILE (read by
-- every thread when the script loads). Used for point reads by key (every key of the set) and the
-- filtered queries (one ProductID after another), so no one row or page stays hot.
local paths = {}
local file = os.getenv("PATHS_FILE")
if file then
    for line in io.lines(file) do
        if #line > 0 then paths[#paths + 1] = line end
    end
end
if #paths == 0 then
    -- Exit: after a script error wrk would carry on with plain GETs of the URL given.
    io.stderr:write("paths.lua: no paths in PATHS_FILE (" .. tostring(file) .. ")\n")
    os.exit(2)
end

local counter = 0
function setup(thread)
    counter = counter + 1
    thread:set("seed", counter)
end

local order, i
function init(args)
    math.randomseed(seed or 1)
    order = {}
    for k = 1, #paths do order[k] = k end
    for k = #order, 2, -1 do
        local j = math.random(k)
        order[k], order[j] = order[j], order[k]
    end
    i = 0
end

function request()
    i = i % #order + 1
    return wrk.format("GET", paths[order[i]])
end
