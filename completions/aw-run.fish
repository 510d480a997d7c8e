# fish completion for aw-run(1)

# Helpers shared by the aw completions (the same in every aw-*.fish file).

# The words before the cursor, without the command.
function __aw_tokens
    set -l t (commandline -opc)
    set -e t[1]
    for w in $t
        echo $w
    end
end

# The root directory: --root on the command line, else $AW_ROOT, else the nearest
# .workflow in the current directory or above, else .workflow.
function __aw_root
    set -l root $AW_ROOT
    if test -z "$root"
        set root .workflow
        set -l d $PWD
        while test -n "$d"
            if test -d "$d/.workflow"
                set root "$d/.workflow"
                break
            end
            set d (string replace -r '/[^/]*$' '' -- $d)
        end
    end
    set -l t (__aw_tokens)
    for i in (seq (count $t))
        switch $t[$i]
            case --root
                set -q t[(math $i + 1)]; and set root $t[(math $i + 1)]
            case '--root=*'
                set root (string replace -- --root= '' $t[$i])
        end
    end
    string replace -r '^~' $HOME -- $root
end

# The instance: -i/--instance or a target with @ on the command line, else
# $AW_INSTANCE, else default.
function __aw_instance
    set -l inst $AW_INSTANCE
    test -n "$inst"; or set inst default
    set -l t (__aw_tokens)
    for i in (seq (count $t))
        switch $t[$i]
            case -i --instance
                set -q t[(math $i + 1)]; and set inst $t[(math $i + 1)]
            case '--instance=*'
                set inst (string replace -- --instance= '' $t[$i])
            case '-i?*'
                set inst (string sub -s 3 -- $t[$i])
            case '-*'
            case '*@?*'
                set inst (string replace -r '^[^@]*@' '' -- $t[$i])
        end
    end
    echo $inst
end

# Instance names under the root.
function __aw_instances
    for d in (__aw_root)/*/
        set -l n (basename $d)
        string match -qr '^[A-Za-z0-9][A-Za-z0-9_-]*$' -- $n; and echo $n
    end
end

# Agent names of an instance (default: the current one).
function __aw_agents
    set -l inst $argv[1]
    test -n "$inst"; or set inst (__aw_instance)
    set -l f (__aw_root)/$inst/_state/agents.json
    test -r $f; or return 0
    string replace -rf '^\s*"name":\s*"([A-Za-z][A-Za-z0-9_-]*)".*$' '$1' <$f
end

# Targets: agents, @instance, and agent@instance once an @ is typed.
function __aw_targets
    set -l cur (commandline -ct)
    if string match -qr '^[^@]+@' -- $cur
        for i in (__aw_instances)
            for a in (__aw_agents $i)
                echo $a@$i
            end
        end
    else
        __aw_agents
        for i in (__aw_instances)
            echo @$i
        end
    end
end

# Documents of the current instance, as relative paths.
function __aw_documents
    set -l dir (__aw_root)/(__aw_instance)/documents
    test -d $dir; or return 0
    find $dir -type f ! -path '*/.*' 2>/dev/null | string replace -- $dir/ ''
end

# Is --serve on the command line?
function __aw_run_serving
    contains -- --serve (__aw_tokens)
end

complete -c aw-run -n 'not __aw_run_serving' -F
# With --serve: agents, and agent@instance once an @ is typed.
function __aw_run_agents
    if string match -qr '^[^@]+@' -- (commandline -ct)
        __aw_targets
    else
        __aw_agents
    end
end

complete -c aw-run -n __aw_run_serving -f -a '(__aw_run_agents)' -d Agent
complete -c aw-run -l root -x -a '(__fish_complete_directories)' -d 'Root directory'
complete -c aw-run -s i -l instance -x -a '(__aw_instances)' -d Instance
complete -c aw-run -l check -d 'Check the file and exit'
complete -c aw-run -l var -x -d 'Define a variable NAME=VALUE'
complete -c aw-run -l keep -d 'Stay until stopped'
complete -c aw-run -l create -d 'Create the instance named by -i even if an existing one has a near name'
complete -c aw-run -l detach -d 'Run in the background and print its pid'
complete -c aw-run -l serve -d 'Serve registered agents, without a workflow file'
complete -c aw-run -l iter -x -d 'Run one agent on the kickoff N times or for a duration'
complete -c aw-run -l agent -x -d 'The agent that iterates'
complete -c aw-run -l resume -d 'Continue the last --iter series'
complete -c aw-run -l debounce -x -d 'Accepted and ignored (the end of the work is known exactly)'
complete -c aw-run -l poll -x -d 'Poll the channel every SECS seconds'
complete -c aw-run -l max-runs -x -d 'Most runs per agent'
complete -c aw-run -l max-rate -x -a off -d 'With --keep, pause an agent running N times in DURATION on agents messages alone'
complete -c aw-run -l max-pair -x -a off -d 'With --keep, pause an agent once two agents mentioned each other N times in DURATION'
complete -c aw-run -l timeout -x -d 'Bound on the whole workflow'
complete -c aw-run -l retries -x -d 'Attempts per run'
complete -c aw-run -l backoff -x -d 'Wait before the second attempt'
complete -c aw-run -l cooldown -x -d 'Wait before retrying the messages of a failed run'
complete -c aw-run -l budget-usd -x -d 'Stop every agent once the runs cost more than USD dollars'
complete -c aw-run -l budget-tokens -x -d 'Stop every agent once the runs used more than N tokens'
complete -c aw-run -s q -l quiet -d 'Print no entries, run events or summary'
complete -c aw-run -l json -d 'Print entries and events as JSON Lines'
complete -c aw-run -s h -l help -d 'Print help'
complete -c aw-run -s V -l version -d 'Print the version'
