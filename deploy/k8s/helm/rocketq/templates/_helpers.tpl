{{/* The chart's name (nameOverride wins). */}}
{{- define "rocketq.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
The prefix of every object's name: fullnameOverride, else the release name when it contains
the chart's name, else <release>-<chart>. At most 30 characters, so that
<fullname>-<group> stays a StatefulSet name (52 characters at most) for group names of up
to 21 characters.
*/}}
{{- define "rocketq.fullname" -}}
{{- $name := "" }}
{{- if .Values.fullnameOverride }}
{{- $name = .Values.fullnameOverride }}
{{- else if contains (include "rocketq.name" .) .Release.Name }}
{{- $name = .Release.Name }}
{{- else }}
{{- $name = printf "%s-%s" .Release.Name (include "rocketq.name" .) }}
{{- end }}
{{- if gt (len $name) 30 }}
{{- fail (printf "the name prefix %q is longer than 30 characters; choose a shorter release name or set fullnameOverride" $name) }}
{{- end }}
{{- $name }}
{{- end }}

{{- define "rocketq.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* Labels of every object. */}}
{{- define "rocketq.labels" -}}
helm.sh/chart: {{ include "rocketq.chart" . }}
{{ include "rocketq.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{/* The labels that select the release's pods (a component label is added to them). */}}
{{- define "rocketq.selectorLabels" -}}
app.kubernetes.io/name: {{ include "rocketq.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "rocketq.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) }}
{{- end }}

{{/* The nameserver's StatefulSet, its pods' prefix, and its headless service. */}}
{{- define "rocketq.nameserver.fullname" -}}
{{- printf "%s-nameserver" (include "rocketq.fullname" .) }}
{{- end }}

{{- define "rocketq.nameserver.headless" -}}
{{- printf "%s-nameserver-headless" (include "rocketq.fullname" .) }}
{{- end }}

{{/*
namesrv_addr of the brokers: every nameserver pod's stable DNS name,
<fullname>-nameserver-N.<fullname>-nameserver-headless.<namespace>.svc.<domain>:<port>, ";"
between them.
*/}}
{{- define "rocketq.namesrvAddr" -}}
{{- $addrs := list }}
{{- $sts := include "rocketq.nameserver.fullname" . }}
{{- $svc := include "rocketq.nameserver.headless" . }}
{{- range $i := until (int .Values.nameserver.replicas) }}
{{- $addrs = append $addrs (printf "%s-%d.%s.%s.svc.%s:%d" $sts $i $svc $.Release.Namespace $.Values.clusterDomain (int $.Values.nameserver.ports.remoting)) }}
{{- end }}
{{- join ";" $addrs }}
{{- end }}

{{/*
The broker groups' names as a JSON list: broker.groups is a count (1 -> broker-a, 2 ->
broker-a, broker-b ...) or a list of names. Bad values fail here with the reason (the schema
refuses them first; this holds when it is skipped).
*/}}
{{- define "rocketq.groups" -}}
{{- $groups := .Values.broker.groups }}
{{- $names := list }}
{{- if kindIs "slice" $groups }}
{{- if not $groups }}
{{- fail "broker.groups: the list is empty; give a count (1, 2 ...) or at least one group name" }}
{{- end }}
{{- range $groups }}
{{- if not (regexMatch "^[a-z0-9]([-a-z0-9]{0,19}[a-z0-9])?$" (toString .)) }}
{{- fail (printf "broker.groups: %q is not a group name: lower-case letters, digits and '-', at most 21 characters (e.g. broker-a)" (toString .)) }}
{{- end }}
{{- if or (has (toString .) $names) (eq (toString .) "nameserver") }}
{{- fail (printf "broker.groups: %q is listed twice or clashes with the nameserver's objects; choose another name" (toString .)) }}
{{- end }}
{{- $names = append $names (toString .) }}
{{- end }}
{{- else if or (kindIs "float64" $groups) (kindIs "int" $groups) (kindIs "int64" $groups) }}
{{- $count := int $groups }}
{{- if or (lt $count 1) (gt $count 26) (ne (float64 $count) (float64 $groups)) }}
{{- fail (printf "broker.groups: %v is not a number of groups from 1 to 26 (broker-a .. broker-z); give a list of names for other layouts" $groups) }}
{{- end }}
{{- range $i := until $count }}
{{- $names = append $names (printf "broker-%s" (substr $i (add1 $i | int) "abcdefghijklmnopqrstuvwxyz")) }}
{{- end }}
{{- else }}
{{- fail (printf "broker.groups: %v is neither a count nor a list of group names" $groups) }}
{{- end }}
{{- toJson $names }}
{{- end }}

{{/* Checks of the broker values the templates rely on. */}}
{{- define "rocketq.validate" -}}
{{- $b := .Values.broker }}
{{- if not (has $b.replication (list "none" "ha" "raft")) }}
{{- fail (printf "broker.replication: %q is not one of none, ha, raft" (toString $b.replication)) }}
{{- end }}
{{- if not (has $b.role (list "ASYNC_MASTER" "SYNC_MASTER")) }}
{{- fail (printf "broker.role: %q is not ASYNC_MASTER or SYNC_MASTER" (toString $b.role)) }}
{{- end }}
{{- if and (eq $b.replication "none") (eq $b.role "SYNC_MASTER") }}
{{- fail "broker.role: a SYNC_MASTER without a slave refuses every send (SLAVE_NOT_AVAILABLE); set broker.replication=ha or broker.role=ASYNC_MASTER" }}
{{- end }}
{{- if lt (int .Values.nameserver.replicas) 1 }}
{{- fail "nameserver.replicas: brokers need at least one nameserver" }}
{{- end }}
{{- range $key := keys $b.config | sortAlpha }}
{{- $owner := get (include "rocketq.brokerKeysOwned" $ | fromYaml) $key }}
{{- if $owner }}
{{- fail (printf "broker.config.%s: the chart sets this key (%s); remove it from broker.config" $key $owner) }}
{{- end }}
{{- end }}
{{- range $key := keys .Values.nameserver.config | sortAlpha }}
{{- $owner := get (include "rocketq.nameserverKeysOwned" $ | fromYaml) $key }}
{{- if $owner }}
{{- fail (printf "nameserver.config.%s: the chart sets this key (%s); remove it from nameserver.config" $key $owner) }}
{{- end }}
{{- end }}
{{- end }}

{{/* broker.toml keys the chart sets, and the value to use instead. */}}
{{- define "rocketq.brokerKeysOwned" -}}
broker_cluster_name: use clusterName
broker_name: use broker.groups
broker_id: each pod's StatefulSet ordinal
broker_role: use broker.role and broker.replication
broker_ip1: each pod's IP
namesrv_addr: the nameserver pods
bind_address: 0.0.0.0 in a pod
listen_port: use broker.ports.client
ha_listen_port: use broker.ports.ha
metrics_port: use broker.ports.metrics
store_path_root_dir: the store volume
enable_dledger_commit_log: use broker.replication
dledger_group: the group's name
dledger_peers: the group's pods
dledger_self_id: each pod's StatefulSet ordinal
{{- end }}

{{- define "rocketq.nameserverKeysOwned" -}}
listen_port: use nameserver.ports.remoting
bind_address: 0.0.0.0 in a pod
metrics_port: use nameserver.ports.metrics
kv_config_path: the data volume
{{- end }}

{{/*
A TOML file from a map, one `key = value` line per key in the order given by its "keys"
list: strings quoted (JSON escapes are TOML's), booleans and numbers bare.
*/}}
{{- define "rocketq.toml" -}}
{{- range $key := .keys }}
{{- $value := get $.values $key }}
{{- if kindIs "string" $value }}
{{ $key }} = {{ toJson $value }}
{{- else if kindIs "bool" $value }}
{{ $key }} = {{ ternary "true" "false" $value }}
{{- else if or (kindIs "int" $value) (kindIs "int64" $value) }}
{{ $key }} = {{ $value }}
{{- else if kindIs "float64" $value }}
{{ $key }} = {{ if eq (float64 (int64 $value)) $value }}{{ int64 $value }}{{ else }}{{ $value }}{{ end }}
{{- else }}
{{- fail (printf "%s: %v is not a string, boolean or number" $key $value) }}
{{- end }}
{{- end }}
{{- end }}

{{/*
Default pod anti-affinity: the pods matching "labels" preferably (soft) or necessarily (hard)
on different nodes. Argument: dict "mode" "labels".
*/}}
{{- define "rocketq.antiAffinity" -}}
podAntiAffinity:
{{- if eq .mode "hard" }}
  requiredDuringSchedulingIgnoredDuringExecution:
    - topologyKey: kubernetes.io/hostname
      labelSelector:
        matchLabels:
          {{- toYaml .labels | nindent 10 }}
{{- else }}
  preferredDuringSchedulingIgnoredDuringExecution:
    - weight: 100
      podAffinityTerm:
        topologyKey: kubernetes.io/hostname
        labelSelector:
          matchLabels:
            {{- toYaml .labels | nindent 12 }}
{{- end }}
{{- end }}

{{/* Pods per broker group: none 1, ha the master and its slaves, raft three members. */}}
{{- define "rocketq.broker.replicas" -}}
{{- $b := .Values.broker }}
{{- if eq $b.replication "raft" }}3{{ else if eq $b.replication "ha" }}{{ add1 (int $b.slaves) }}{{ else }}1{{ end }}
{{- end }}

{{/* Labels of a broker group's objects and pods. Argument: dict "root" "group". */}}
{{- define "rocketq.broker.selectorLabels" -}}
{{ include "rocketq.selectorLabels" .root }}
app.kubernetes.io/component: broker
rocketq/group: {{ .group }}
{{- end }}

{{/*
A group's broker.toml. Argument: dict "root" "group". The keys the chart sets come first,
then those of broker.config in alphabetical order.
*/}}
{{- define "rocketq.broker.toml" -}}
{{- $root := .root }}
{{- $group := .group }}
{{- $b := $root.Values.broker }}
{{- $values := dict
  "broker_cluster_name" $root.Values.clusterName
  "broker_name" $group
  "namesrv_addr" (include "rocketq.namesrvAddr" $root)
  "bind_address" "0.0.0.0"
  "listen_port" (int $b.ports.client)
  "metrics_port" (int $b.ports.metrics)
  "store_path_root_dir" "/home/rocketq/store" }}
{{- $keys := list "broker_cluster_name" "broker_name" "namesrv_addr" "bind_address" "listen_port" "metrics_port" "store_path_root_dir" }}
{{- if eq $b.replication "raft" }}
{{- $sts := printf "%s-%s" (include "rocketq.fullname" $root) $group }}
{{- $peers := list }}
{{- range $i := until 3 }}
{{- $peers = append $peers (printf "n%d-%s-%d.%s-headless.%s.svc.%s:%d" $i $sts $i $sts $root.Release.Namespace $root.Values.clusterDomain (int $b.ports.raft)) }}
{{- end }}
{{- $_ := set $values "enable_dledger_commit_log" true }}
{{- $_ = set $values "dledger_group" $group }}
{{- $_ = set $values "dledger_peers" (join ";" $peers) }}
{{- $keys = concat $keys (list "enable_dledger_commit_log" "dledger_group" "dledger_peers") }}
{{- else }}
{{- $_ := set $values "ha_listen_port" (int $b.ports.ha) }}
{{- $_ = set $values "broker_role" $b.role }}
{{- $keys = concat $keys (list "ha_listen_port" "broker_role") }}
{{- end }}
{{- range $key := keys $b.config | sortAlpha }}
{{- $_ := set $values $key (get $b.config $key) }}
{{- $keys = append $keys $key }}
{{- end }}
{{- include "rocketq.toml" (dict "keys" $keys "values" $values) | trim }}
{{- end }}

{{/* The nameserver's nameserver.toml: the keys the chart sets, then nameserver.config's. */}}
{{- define "rocketq.nameserver.toml" -}}
{{- $n := .Values.nameserver }}
{{- $values := dict
  "listen_port" (int $n.ports.remoting)
  "bind_address" "0.0.0.0"
  "metrics_port" (int $n.ports.metrics)
  "kv_config_path" "/home/rocketq/namesrv/kvConfig.json" }}
{{- $keys := list "listen_port" "bind_address" "metrics_port" "kv_config_path" }}
{{- range $key := keys $n.config | sortAlpha }}
{{- $_ := set $values $key (get $n.config $key) }}
{{- $keys = append $keys $key }}
{{- end }}
{{- include "rocketq.toml" (dict "keys" $keys "values" $values) | trim }}
{{- end }}
