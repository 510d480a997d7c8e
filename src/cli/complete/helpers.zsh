# Helpers shared by the aw completions (every generated file holds them).

# The root directory: --root on the command line, else $AW_ROOT, else the nearest
# .workflow in the current directory or above, else .workflow.
(( $+functions[_aw_root] )) || _aw_root() {
  local r=${opt_args[--root]:-${_aw_outer_root:-$AW_ROOT}} d=$PWD
  if [[ -z $r ]]; then
    r=.workflow
    while [[ -n $d ]]; do
      [[ -d $d/.workflow ]] && { r=$d/.workflow; break; }
      d=${d%/*}
    done
  fi
  r=${(Q)r}
  REPLY=${r/#\~/$HOME}
}

# The instance: -i/--instance on the command line, else $AW_INSTANCE, else default.
(( $+functions[_aw_instance] )) || _aw_instance() {
  REPLY=${opt_args[-i]:-${opt_args[--instance]:-${_aw_outer_instance:-${AW_INSTANCE:-default}}}}
}

# Instance names under the root, in reply.
(( $+functions[_aw_instance_names] )) || _aw_instance_names() {
  local REPLY
  _aw_root
  reply=( $REPLY/*(N/:t) )
  reply=( ${reply:#*[^A-Za-z0-9_-]*} )
  reply=( ${reply:#[^A-Za-z0-9]*} )
}

# Agent names of instance $1 (default: the current one), in reply.
(( $+functions[_aw_agent_names] )) || _aw_agent_names() {
  local REPLY inst=$1 f
  [[ -n $inst ]] || { _aw_instance; inst=$REPLY }
  _aw_root
  f=$REPLY/$inst/_state/agents.json
  reply=()
  [[ -r $f ]] || return 0
  reply=( ${(f)"$(sed -n 's/^ *"name": *"\([A-Za-z][A-Za-z0-9_-]*\)".*/\1/p' $f)"} )
}

(( $+functions[_aw_instances] )) || _aw_instances() {
  local -a reply
  _aw_instance_names
  _wanted instances expl instance compadd -a reply
}

(( $+functions[_aw_agents] )) || _aw_agents() {
  local -a reply
  _aw_agent_names
  _wanted agents expl agent compadd "$@" -a reply
}

# agent, agent@instance or @instance.
(( $+functions[_aw_targets] )) || _aw_targets() {
  local -a reply agents insts full
  local i a
  _aw_agent_names; agents=( $reply )
  _aw_instance_names; insts=( $reply )
  if [[ $PREFIX == ?*@* ]]; then
    for i in $insts; do
      _aw_agent_names $i
      for a in $reply; do full+=( $a@$i ); done
    done
    _wanted targets expl 'agent@instance' compadd -a full
  else
    _alternative \
      "agents:agent:compadd -a agents" \
      "instances:instance:compadd -p @ -a insts"
  fi
}

# Documents of the current instance, as relative paths.
(( $+functions[_aw_documents] )) || _aw_documents() {
  local REPLY root inst
  local -a docs
  _aw_root; root=$REPLY
  _aw_instance; inst=$REPLY
  docs=( $root/$inst/documents/**/*(N.) )
  docs=( ${docs#"$root/$inst/documents/"} )
  docs=( ${docs:#(*/|).*} )
  _wanted documents expl document compadd -a docs
}

