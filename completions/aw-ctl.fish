# fish completion for aw-ctl(1)

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

# The command words before the cursor (options may come anywhere).
function __aw_ctl_words
    set -l skip 0
    for t in (__aw_tokens)
        if test $skip = 1
            set skip 0
            continue
        end
        switch $t
            case --root -i --instance -m --model --backend --prompt --prompt-file --until --as \
                    --option --rule --quorum --tie-breaker --timeout --description --id --reason
                set skip 1
            case '-*'
            case '*'
                echo $t
        end
    end
end

# Are the command words before the cursor exactly the arguments?
function __aw_ctl_at
    set -l w (__aw_ctl_words)
    test (count $w) -eq (count $argv); or return 1
    for i in (seq (count $argv))
        test "$w[$i]" = "$argv[$i]"; or return 1
    end
end

# Do the command words start with the arguments?
function __aw_ctl_in
    set -l w (__aw_ctl_words)
    for i in (seq (count $argv))
        test "$w[$i]" = "$argv[$i]"; or return 1
    end
end

complete -c aw-ctl -f
complete -c aw-ctl -l root -x -a '(__fish_complete_directories)' -d 'Root directory'
complete -c aw-ctl -s i -l instance -x -a '(__aw_instances)' -d Instance
complete -c aw-ctl -s h -l help -d 'Print help'
complete -c aw-ctl -s V -l version -d 'Print the version'

complete -c aw-ctl -n '__aw_ctl_at' -a new -d 'Register an agent'
complete -c aw-ctl -n '__aw_ctl_at' -a rm -d 'Unregister an agent'
complete -c aw-ctl -n '__aw_ctl_at' -a ls -d 'List instances, agents and unread counts'
complete -c aw-ctl -n '__aw_ctl_at' -a ack -d 'Acknowledge an inbox'
complete -c aw-ctl -n '__aw_ctl_at' -a doc -d 'Read and write documents'

complete -c aw-ctl -n '__aw_ctl_in new' -s m -l model -x -d 'The model of the agent'
complete -c aw-ctl -n '__aw_ctl_in new' -l backend -x -a 'claude codex anthropic openai exec mock external' -d 'How the agent is run'
complete -c aw-ctl -n '__aw_ctl_in new' -l prompt -x -d 'The system prompt'
complete -c aw-ctl -n '__aw_ctl_in new' -l prompt-file -r -F -d 'Read the system prompt from a file'
complete -c aw-ctl -n '__aw_ctl_in new' -l replace -d 'Replace an agent that is already registered'
complete -c aw-ctl -n '__aw_ctl_at rm' -a '(__aw_agents)'
complete -c aw-ctl -n '__aw_ctl_in ls' -l json -d 'JSON Lines output'
complete -c aw-ctl -n '__aw_ctl_at ack' -a '(__aw_agents)'
complete -c aw-ctl -n '__aw_ctl_in ack' -l until -x -d 'Acknowledge up to entry ID'

complete -c aw-ctl -n '__aw_ctl_at doc' -a read -d 'Print a document'
complete -c aw-ctl -n '__aw_ctl_at doc' -a write -d 'Replace a document with stdin'
complete -c aw-ctl -n '__aw_ctl_at doc' -a append -d 'Append stdin to a document'
complete -c aw-ctl -n '__aw_ctl_at doc' -a create -d 'Create a new document from stdin'
complete -c aw-ctl -n '__aw_ctl_at doc' -a list -d 'List the documents'
complete -c aw-ctl -n '__aw_ctl_at doc' -a rm -d 'Delete a document'
complete -c aw-ctl -n '__aw_ctl_at doc' -a owner -d 'Show, set or clear the document owner'
complete -c aw-ctl -n '__aw_ctl_at doc read; or __aw_ctl_at doc write; or __aw_ctl_at doc append; or __aw_ctl_at doc rm' -a '(__aw_documents)'
complete -c aw-ctl -n '__aw_ctl_at doc owner' -a '(__aw_agents)'
complete -c aw-ctl -n '__aw_ctl_in doc; and not __aw_ctl_in doc list; and not __aw_ctl_in doc owner' -l as -x -a '(__aw_agents; echo user)' -d 'Act as AGENT'
complete -c aw-ctl -n '__aw_ctl_in doc list' -l json -d 'JSON Lines output'
complete -c aw-ctl -n '__aw_ctl_in doc owner' -l clear -d 'Remove the document owner'

complete -c aw-ctl -n '__aw_ctl_at' -a status -d 'Agents state, task and unread counts'
complete -c aw-ctl -n '__aw_ctl_at' -a proposals -d 'List proposals'
complete -c aw-ctl -n '__aw_ctl_at' -a propose -d 'Create a proposal'
complete -c aw-ctl -n '__aw_ctl_at' -a vote -d 'Vote on a proposal'
complete -c aw-ctl -n '__aw_ctl_at' -a cancel -d 'Cancel a proposal you created'
complete -c aw-ctl -n '__aw_ctl_at' -a mcp-config -d 'Print the MCP configuration for Claude Code or Codex'
complete -c aw-ctl -n '__aw_ctl_at status' -a '(__aw_agents)'
complete -c aw-ctl -n '__aw_ctl_in status; or __aw_ctl_in proposals; or __aw_ctl_in propose; or __aw_ctl_in vote; or __aw_ctl_in cancel' -l json -d 'JSON output'
complete -c aw-ctl -n '__aw_ctl_in proposals' -l all -d 'List closed proposals too'
complete -c aw-ctl -n '__aw_ctl_at propose' -a 'election decision approval assignment'
complete -c aw-ctl -n '__aw_ctl_in propose' -l option -x -d 'An option: ID or ID=LABEL'
complete -c aw-ctl -n '__aw_ctl_in propose' -l rule -x -a 'plurality majority unanimous' -d 'Resolution rule'
complete -c aw-ctl -n '__aw_ctl_in propose' -l quorum -x -d 'Votes needed'
complete -c aw-ctl -n '__aw_ctl_in propose' -l tie-breaker -x -a 'first random creator-decides' -d 'Tie-breaker'
complete -c aw-ctl -n '__aw_ctl_in propose' -l binding -d 'Enforce the result'
complete -c aw-ctl -n '__aw_ctl_in propose' -l timeout -x -d 'Resolve or expire after SECS seconds'
complete -c aw-ctl -n '__aw_ctl_in propose' -l description -x -d 'Longer text'
complete -c aw-ctl -n '__aw_ctl_in propose' -l id -x -d 'Proposal id'
complete -c aw-ctl -n '__aw_ctl_in vote' -l reason -x -d 'Why'
complete -c aw-ctl -n '__aw_ctl_in propose; or __aw_ctl_in vote; or __aw_ctl_in cancel' -l as -x -a '(__aw_agents; echo user)' -d 'Act as AGENT'
complete -c aw-ctl -n '__aw_ctl_at mcp-config' -a '(for a in (__aw_agents); echo $a@(__aw_instance); end)'
complete -c aw-ctl -n '__aw_ctl_in mcp-config' -l codex -d 'Print Codex command-line overrides'
complete -c aw-ctl -n '__aw_ctl_in mcp-config' -l codex-toml -d 'Print a Codex config.toml fragment'
complete -c aw-ctl -n '__aw_ctl_in mcp-config' -l collab -d 'The server gives the collab tools too'
complete -c aw-ctl -n '__aw_ctl_in mcp-config' -l delegate -d 'The server gives only the coordinating tools'

complete -c aw-ctl -n '__aw_ctl_at' -a ps -d 'List the agents aw-run serves'
complete -c aw-ctl -n '__aw_ctl_at' -a top -d 'A full-screen live view of the instance'
complete -c aw-ctl -n '__aw_ctl_at' -a stop -d 'Stop the aw-run serving an agent or instance'
complete -c aw-ctl -n '__aw_ctl_at' -a runs -d 'List or show the transcripts of runs'
complete -c aw-ctl -n '__aw_ctl_in ps; or __aw_ctl_in runs' -l json -d 'JSON Lines output'
complete -c aw-ctl -n '__aw_ctl_at stop' -a '(__aw_targets)'
complete -c aw-ctl -n '__aw_ctl_in stop' -l all -d 'Stop every served agent of the root'
complete -c aw-ctl -n '__aw_ctl_in stop' -l all-roots -d 'Stop every server of the user, of every root'
complete -c aw-ctl -n '__aw_ctl_in ps' -l all-roots -d 'Served agents of every root'
complete -c aw-ctl -n '__aw_ctl_in new; or __aw_ctl_in doc write; or __aw_ctl_in doc append; or __aw_ctl_in doc create' -l create -d 'Create the instance even if an existing one has a near name'
complete -c aw-ctl -n '__aw_ctl_in stop' -l timeout -x -d 'Wait at most SECS seconds'
complete -c aw-ctl -n '__aw_ctl_at runs' -a '(__aw_agents)'
complete -c aw-ctl -n '__aw_ctl_in runs' -s f -l follow -d 'Follow the attempts of the agent as they run'
complete -c aw-ctl -n '__aw_ctl_at' -a budget -d 'What the instance spent, and its budget'
complete -c aw-ctl -n '__aw_ctl_at budget' -a reset -d 'Start counting the spending again'
complete -c aw-ctl -n '__aw_ctl_in budget' -l json -d 'JSON output'
