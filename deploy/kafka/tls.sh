#!/usr/bin/env bash
# Make a throw-away CA, a broker certificate signed by it, and a server.properties overlay that
# adds an SSL and a SASL_SSL listener to the local broker (deploy/kafka/start.sh).
#
#   deploy/kafka/tls.sh DIR [--ssl-port N] [--sasl-ssl-port N] [--user NAME:PASSWORD]...
#
# Needs only Java's keytool (the broker needs Java anyway). Writes into DIR (created):
#   ca.pem                 the CA certificate: clients' ssl_cafile (PREFSTREAM_SSL_CAFILE)
#   ca.p12, broker.p12     the CA's and the broker's PKCS#12 key stores (password in tls.env)
#   server-tls.properties  the overlay: PREFSTREAM_KAFKA_EXTRA_CONFIG=DIR/server-tls.properties
#   tls.env                shell variables for start.sh (PREFSTREAM_KAFKA_EXTRA_CONFIG,
#                          PREFSTREAM_KAFKA_SCRAM_USERS) and the ports; `source DIR/tls.env`
# The broker certificate is valid for 127.0.0.1 and localhost (subjectAltName), 30 days.
# The PLAINTEXT listener (start.sh's PREFSTREAM_KAFKA_PORT) and the controller stay as they are;
# the SASL_SSL listener accepts PLAIN, SCRAM-SHA-256 and SCRAM-SHA-512 for every --user (SCRAM
# users are written into the storage when start.sh formats it, so start a fresh data dir).
# Default ports 9094 (SSL) and 9095 (SASL_SSL); default user prefstream:prefstream-secret.
set -euo pipefail

usage() { sed -n '2,18p' "$0"; }
[ $# -ge 1 ] || { usage >&2; exit 2; }
case "$1" in -h|--help) usage; exit 0 ;; esac
DIR="$1"; shift
SSL_PORT=9094
SASL_SSL_PORT=9095
USERS=()
while [ $# -gt 0 ]; do
  case "$1" in
    --ssl-port) SSL_PORT="$2"; shift ;;
    --sasl-ssl-port) SASL_SSL_PORT="$2"; shift ;;
    --user) USERS+=("$2"); shift ;;
    *) echo "tls.sh: unknown argument '$1' (expected --ssl-port N, --sasl-ssl-port N, --user NAME:PASSWORD)" >&2; exit 2 ;;
  esac
  shift
done
[ ${#USERS[@]} -gt 0 ] || USERS=("prefstream:prefstream-secret")
for u in "${USERS[@]}"; do
  case "$u" in
    *[[:space:]\"\;,=\[\]]*|:*|*:) echo "tls.sh: --user '$u' must be NAME:PASSWORD without spaces, quotes, ';', ',', '=' or brackets" >&2; exit 2 ;;
    *:*) ;;
    *) echo "tls.sh: --user '$u' must be NAME:PASSWORD" >&2; exit 2 ;;
  esac
done
command -v keytool >/dev/null || { echo "tls.sh: keytool not found (it comes with Java 17+: apt-get install -y openjdk-17-jre-headless)" >&2; exit 1; }

mkdir -p "$DIR"
DIR="$(cd "$DIR" && pwd)"
rm -f "$DIR"/ca.p12 "$DIR"/broker.p12 "$DIR"/ca.pem "$DIR"/broker.csr "$DIR"/broker.pem
PW="$(head -c 12 /dev/urandom | od -An -tx1 | tr -d ' \n')"
KT=(keytool -J-Xmx64m -J-XX:TieredStopAtLevel=1 -J-Xshare:auto)
DAYS=30

# 1. the CA (self-signed, may sign certificates)
"${KT[@]}" -genkeypair -alias ca -dname "CN=prefstream test CA" -keyalg EC -groupname secp256r1 \
  -validity "$DAYS" -ext bc:c -ext ku:c=keyCertSign,cRLSign \
  -keystore "$DIR/ca.p12" -storetype PKCS12 -storepass "$PW" >/dev/null 2>&1
"${KT[@]}" -exportcert -rfc -alias ca -keystore "$DIR/ca.p12" -storepass "$PW" -file "$DIR/ca.pem" >/dev/null 2>&1
# 2. the broker key, a certificate request, the CA's signature (SAN 127.0.0.1 + localhost)
"${KT[@]}" -genkeypair -alias broker -dname "CN=localhost" -keyalg EC -groupname secp256r1 -validity "$DAYS" \
  -keystore "$DIR/broker.p12" -storetype PKCS12 -storepass "$PW" >/dev/null 2>&1
"${KT[@]}" -certreq -alias broker -keystore "$DIR/broker.p12" -storepass "$PW" -file "$DIR/broker.csr" >/dev/null 2>&1
"${KT[@]}" -gencert -alias ca -keystore "$DIR/ca.p12" -storepass "$PW" -infile "$DIR/broker.csr" \
  -outfile "$DIR/broker.pem" -rfc -validity "$DAYS" -ext "san=ip:127.0.0.1,dns:localhost" \
  -ext ku:c=digitalSignature,keyAgreement -ext eku=serverAuth >/dev/null 2>&1
# 3. the broker key store holds the chain: CA first (trusted), then the signed certificate
"${KT[@]}" -importcert -noprompt -alias ca -file "$DIR/ca.pem" -keystore "$DIR/broker.p12" -storepass "$PW" >/dev/null 2>&1
"${KT[@]}" -importcert -alias broker -file "$DIR/broker.pem" -keystore "$DIR/broker.p12" -storepass "$PW" >/dev/null 2>&1
rm -f "$DIR/broker.csr"
chmod 600 "$DIR/ca.p12" "$DIR/broker.p12"

plain_users=""; scram_users=""
for u in "${USERS[@]}"; do
  plain_users+=" user_${u%%:*}=\"${u#*:}\""
  scram_users+="${scram_users:+,}$u"
done
first="${USERS[0]}"
CONF="$DIR/server-tls.properties"
cat > "$CONF" <<EOF
# Overlay for deploy/kafka/server.properties written by deploy/kafka/tls.sh: keys here win.
# @PORT@ and @CONTROLLER_PORT@ are rendered by start.sh (PREFSTREAM_KAFKA_PORT, ..._CONTROLLER_PORT).
listeners=PLAINTEXT://127.0.0.1:@PORT@,CONTROLLER://127.0.0.1:@CONTROLLER_PORT@,SSL://127.0.0.1:$SSL_PORT,SASL_SSL://127.0.0.1:$SASL_SSL_PORT
advertised.listeners=PLAINTEXT://127.0.0.1:@PORT@,SSL://127.0.0.1:$SSL_PORT,SASL_SSL://127.0.0.1:$SASL_SSL_PORT
listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT,SSL:SSL,SASL_SSL:SASL_SSL
ssl.keystore.type=PKCS12
ssl.keystore.location=$DIR/broker.p12
ssl.keystore.password=$PW
ssl.key.password=$PW
ssl.client.auth=none
sasl.enabled.mechanisms=PLAIN,SCRAM-SHA-256,SCRAM-SHA-512
listener.name.sasl_ssl.plain.sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required username="${first%%:*}" password="${first#*:}"$plain_users;
listener.name.sasl_ssl.scram-sha-256.sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required;
listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required;
EOF
chmod 600 "$CONF"
cat > "$DIR/tls.env" <<EOF
PREFSTREAM_KAFKA_EXTRA_CONFIG=$CONF
PREFSTREAM_KAFKA_SCRAM_USERS=$scram_users
PREFSTREAM_TLS_SSL_BOOTSTRAP=127.0.0.1:$SSL_PORT
PREFSTREAM_TLS_SASL_SSL_BOOTSTRAP=127.0.0.1:$SASL_SSL_PORT
PREFSTREAM_TLS_CAFILE=$DIR/ca.pem
EOF
chmod 600 "$DIR/tls.env"
echo "$CONF"
