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
{{- include "rocketq.validateSecurity" . }}
{{- end }}

{{/*
Checks of auth and tls: auth on needs a super user and inner credentials, each from an
existing Secret or from values (not both); tls on needs a Secret or cert-manager.
*/}}
{{- define "rocketq.validateSecurity" -}}
{{- $a := .Values.auth }}
{{- if $a.enabled }}
{{- $checks := list
  (list "auth.superUser" $a.superUser "username" "password" "the initial super user")
  (list "auth.innerCredentials" $a.innerCredentials "accessKey" "secretKey" "what the servers sign their own requests with") }}
{{- range $checks }}
{{- $path := index . 0 }}{{ $v := index . 1 }}{{ $k1 := index . 2 }}{{ $k2 := index . 3 }}{{ $what := index . 4 }}
{{- $first := get $v $k1 | default "" }}{{ $second := get $v $k2 | default "" }}
{{- if $v.existingSecret }}
{{- if or $first $second }}
{{- fail (printf "%s: existingSecret %q and %s/%s are both given; keep one" $path $v.existingSecret $k1 $k2) }}
{{- end }}
{{- else if not (and $first $second) }}
{{- fail (printf "auth.enabled is true but %s (%s) is missing: name a Secret with the keys %s and %s in %s.existingSecret, or set %s.%s and %s.%s" $path $what $k1 $k2 $path $path $k1 $path $k2) }}
{{- else }}
{{- range $value := list $first $second }}
{{- if regexMatch "[\"\\\\\\x00-\\x1f]" $value }}
{{- fail (printf "%s: %s and %s may not hold '\"', '\\' or control characters (they are written into JSON)" $path $k1 $k2) }}
{{- end }}
{{- end }}
{{- end }}
{{- end }}
{{- end }}
{{- $t := .Values.tls }}
{{- if $t.enabled }}
{{- if not (has $t.mode (list "permissive" "enforcing")) }}
{{- fail (printf "tls.mode: %q is not permissive or enforcing" (toString $t.mode)) }}
{{- end }}
{{- if not (has $t.clientAuth (list "none" "optional" "require")) }}
{{- fail (printf "tls.clientAuth: %q is not none, optional or require" (toString $t.clientAuth)) }}
{{- end }}
{{- if and $t.existingSecret $t.certManager.enabled }}
{{- fail "tls: existingSecret and certManager.enabled are both given; keep one" }}
{{- else if not (or $t.existingSecret $t.certManager.enabled) }}
{{- fail "tls.enabled is true but no certificate is given: name a Secret with tls.crt, tls.key and ca.crt in tls.existingSecret, or set tls.certManager.enabled with tls.certManager.issuerRef.name" }}
{{- else if and $t.certManager.enabled (not $t.certManager.issuerRef.name) }}
{{- fail "tls.certManager.enabled is true but tls.certManager.issuerRef.name is empty: name the cert-manager Issuer or ClusterIssuer that signs the certificates" }}
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
grpc_listen_port: use broker.grpc.enabled and broker.ports.grpc
store_path_root_dir: the store volume
enable_dledger_commit_log: use broker.replication
dledger_group: the group's name
dledger_peers: the group's pods
dledger_self_id: each pod's StatefulSet ordinal
{{ include "rocketq.securityKeysOwned" . }}
{{- end }}

{{- define "rocketq.nameserverKeysOwned" -}}
listen_port: use nameserver.ports.remoting
bind_address: 0.0.0.0 in a pod
metrics_port: use nameserver.ports.metrics
kv_config_path: the data volume
{{ include "rocketq.securityKeysOwned" . }}
{{- end }}

{{/* Security keys of both servers that the chart sets from auth and tls. */}}
{{- define "rocketq.securityKeysOwned" -}}
authentication_enabled: use auth.enabled
authorization_enabled: use auth.enabled
init_authentication_user: use auth.superUser
inner_client_authentication_credentials: use auth.innerCredentials
tls_server_mode: use tls.enabled and tls.mode
tls_server_cert_path: use tls.existingSecret or tls.certManager
tls_server_key_path: use tls.existingSecret or tls.certManager
tls_server_trust_cert_path: use tls.existingSecret or tls.certManager
tls_server_need_client_auth: use tls.clientAuth
tls_node_name_pattern: use tls.nodeNamePattern
tls_client_enable: use tls.enabled
tls_client_cert_path: use tls.existingSecret or tls.certManager
tls_client_key_path: use tls.existingSecret or tls.certManager
tls_client_trust_cert_path: use tls.existingSecret or tls.certManager
tls_client_verify_hostname: use tls.verifyHostname
metrics_tls_enable: use tls.enabled
metrics_bearer_token: use metrics.auth.existingSecret
metrics_basic_auth: use metrics.auth.existingSecret (a bearer token)
{{- end }}

{{/* Where the TLS Secret is mounted in every pod. */}}
{{- define "rocketq.tls.dir" -}}
/etc/rocketq-tls
{{- end }}

{{/*
The security keys of a server's TOML file as a JSON object (auth and tls switches, the
certificate paths), empty when both are off.
*/}}
{{- define "rocketq.security.values" -}}
{{- $values := dict }}
{{- if .Values.auth.enabled }}
{{- $_ := set $values "authentication_enabled" true }}
{{- $_ = set $values "authorization_enabled" true }}
{{- end }}
{{- $t := .Values.tls }}
{{- if $t.enabled }}
{{- $dir := include "rocketq.tls.dir" . }}
{{- $_ := set $values "tls_server_mode" $t.mode }}
{{- $_ = set $values "tls_server_cert_path" (printf "%s/tls.crt" $dir) }}
{{- $_ = set $values "tls_server_key_path" (printf "%s/tls.key" $dir) }}
{{- $_ = set $values "tls_server_trust_cert_path" (printf "%s/ca.crt" $dir) }}
{{- $_ = set $values "tls_server_need_client_auth" $t.clientAuth }}
{{- $_ = set $values "tls_client_enable" true }}
{{- $_ = set $values "tls_client_cert_path" (printf "%s/tls.crt" $dir) }}
{{- $_ = set $values "tls_client_key_path" (printf "%s/tls.key" $dir) }}
{{- $_ = set $values "tls_client_trust_cert_path" (printf "%s/ca.crt" $dir) }}
{{- $_ = set $values "tls_client_verify_hostname" $t.verifyHostname }}
{{- $_ = set $values "metrics_tls_enable" true }}
{{- if $t.nodeNamePattern }}
{{- $_ = set $values "tls_node_name_pattern" $t.nodeNamePattern }}
{{- end }}
{{- end }}
{{- toJson $values }}
{{- end }}

{{/* The order the security keys are written in. */}}
{{- define "rocketq.security.keys" -}}
{{- $keys := list }}
{{- if .Values.auth.enabled }}
{{- $keys = list "authentication_enabled" "authorization_enabled" }}
{{- end }}
{{- if .Values.tls.enabled }}
{{- $keys = concat $keys (list "tls_server_mode" "tls_server_cert_path" "tls_server_key_path" "tls_server_trust_cert_path" "tls_server_need_client_auth" "tls_client_enable" "tls_client_cert_path" "tls_client_key_path" "tls_client_trust_cert_path" "tls_client_verify_hostname" "metrics_tls_enable") }}
{{- if .Values.tls.nodeNamePattern }}
{{- $keys = append $keys "tls_node_name_pattern" }}
{{- end }}
{{- end }}
{{- toJson $keys }}
{{- end }}

{{/* The Secrets holding the super user and the inner credentials. */}}
{{- define "rocketq.auth.superUserSecret" -}}
{{- .Values.auth.superUser.existingSecret | default (printf "%s-super-user" (include "rocketq.fullname" .)) }}
{{- end }}

{{- define "rocketq.auth.innerSecret" -}}
{{- .Values.auth.innerCredentials.existingSecret | default (printf "%s-inner-credentials" (include "rocketq.fullname" .)) }}
{{- end }}

{{/*
The environment a server takes its secrets from (auth on): the Secrets' keys, then
init_authentication_user and inner_client_authentication_credentials as RocketMQ's JSON
made of them (Kubernetes puts $(NAME) of variables defined above in place). The helper
variables do not start with ROCKETQ_, which servers read as config keys.
*/}}
{{- define "rocketq.auth.env" -}}
{{- if .Values.auth.enabled }}
{{- $super := include "rocketq.auth.superUserSecret" . }}
{{- $inner := include "rocketq.auth.innerSecret" . }}
- name: RQ_SUPER_USER_NAME
  valueFrom:
    secretKeyRef:
      name: {{ $super }}
      key: username
- name: RQ_SUPER_USER_PASSWORD
  valueFrom:
    secretKeyRef:
      name: {{ $super }}
      key: password
- name: ROCKETQ_INIT_AUTHENTICATION_USER
  value: {{ `{"username": "$(RQ_SUPER_USER_NAME)", "password": "$(RQ_SUPER_USER_PASSWORD)"}` | squote }}
- name: RQ_INNER_ACCESS_KEY
  valueFrom:
    secretKeyRef:
      name: {{ $inner }}
      key: accessKey
- name: RQ_INNER_SECRET_KEY
  valueFrom:
    secretKeyRef:
      name: {{ $inner }}
      key: secretKey
- name: ROCKETQ_INNER_CLIENT_AUTHENTICATION_CREDENTIALS
  value: {{ `{"accessKey": "$(RQ_INNER_ACCESS_KEY)", "secretKey": "$(RQ_INNER_SECRET_KEY)"}` | squote }}
{{- end }}
{{- end }}

{{/*
The environment a server takes its metrics token from (metrics.auth.existingSecret set):
ROCKETQ_METRICS_BEARER_TOKEN, the metrics_bearer_token key, from the Secret.
*/}}
{{- define "rocketq.metrics.env" -}}
{{- with .Values.metrics.auth.existingSecret }}
- name: ROCKETQ_METRICS_BEARER_TOKEN
  valueFrom:
    secretKeyRef:
      name: {{ . }}
      key: {{ $.Values.metrics.auth.key }}
{{- end }}
{{- end }}

{{/*
The TLS Secret of a component: tls.existingSecret, else the one cert-manager writes for
it. Argument: dict "root" "component" (nameserver or a broker group's name).
*/}}
{{- define "rocketq.tls.secret" -}}
{{- .root.Values.tls.existingSecret | default (printf "%s-%s-tls" (include "rocketq.fullname" .root) .component) }}
{{- end }}

{{/* The name every certificate carries for the ServiceMonitor's check. */}}
{{- define "rocketq.tls.releaseName" -}}
{{- printf "%s.%s.svc.%s" (include "rocketq.fullname" .) .Release.Namespace .Values.clusterDomain }}
{{- end }}

{{/* The probes' scheme: HTTPS once the metrics port serves TLS. */}}
{{- define "rocketq.probeScheme" -}}
{{- ternary "HTTPS" "HTTP" (.Values.tls.enabled | default false) }}
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
then those of broker.config in alphabetical order. grpc_listen_port is always written: the
endpoint's port, or -1 (none) with broker.grpc.enabled false.
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
  "grpc_listen_port" (ternary (int $b.ports.grpc) -1 $b.grpc.enabled)
  "store_path_root_dir" "/home/rocketq/store" }}
{{- $keys := list "broker_cluster_name" "broker_name" "namesrv_addr" "bind_address" "listen_port" "metrics_port" "grpc_listen_port" "store_path_root_dir" }}
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
{{- $values = merge $values (include "rocketq.security.values" $root | fromJson) }}
{{- $keys = concat $keys (include "rocketq.security.keys" $root | fromJsonArray) }}
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
{{- $values = merge $values (include "rocketq.security.values" . | fromJson) }}
{{- $keys = concat $keys (include "rocketq.security.keys" . | fromJsonArray) }}
{{- range $key := keys $n.config | sortAlpha }}
{{- $_ := set $values $key (get $n.config $key) }}
{{- $keys = append $keys $key }}
{{- end }}
{{- include "rocketq.toml" (dict "keys" $keys "values" $values) | trim }}
{{- end }}
