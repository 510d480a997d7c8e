# Helpers shared by the aw completions (every generated file holds them).

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
    find $dir -type f 2>/dev/null | string replace -- $dir/ '' | string match -rv '(^|/)\.'
end

# Is the word before the cursor $argv[1] (an option whose value may be left out)?
function __aw_after
    set -l t (commandline -opc)
    test "$t[-1]" = $argv[1]
end
