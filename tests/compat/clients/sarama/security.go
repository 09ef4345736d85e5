// Security settings of a command: TLS (Net.TLS) and SASL (Net.SASL) as sarama 1.22 offers them.
//
// sarama 1.22 speaks SASL PLAIN (SaslHandshake v0 and raw tokens below Config.Version 1.0, else SaslHandshake v1 and
// SaslAuthenticate v0), SCRAM-SHA-256/512 and OAUTHBEARER (always SaslHandshake v1 + SaslAuthenticate v0). It has no
// SCRAM implementation of its own: Net.SASL.SCRAMClientGeneratorFunc must supply one, and Debian packages no SCRAM
// library for it, so scramClient below implements RFC 5802's client side with Go's standard crypto. Its
// OAUTHBEARER sends the token of a Net.SASL.TokenProvider; tokenProvider hands it the command's token as is.
package main

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/sha512"
	"crypto/subtle"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"fmt"
	"hash"
	"io/ioutil"
	"strconv"
	"strings"

	"github.com/Shopify/sarama"
)

// security: how a command connects, as compatbroker.toolkit.security's "sarama" client config gives it; absent parts
// (or enable=false) keep sarama's plaintext defaults.
type security struct {
	TLS  *tlsSettings  `json:"tls"`
	SASL *saslSettings `json:"sasl"`
}

// tlsSettings: PEM files. CAFile is the broker's trust anchor; CertFile and KeyFile (both or neither) the client's
// certificate; ServerName, when set, the name the broker's certificate is checked against (default: the host).
type tlsSettings struct {
	Enable     bool   `json:"enable"`
	CAFile     string `json:"ca_file"`
	CertFile   string `json:"cert_file"`
	KeyFile    string `json:"key_file"`
	ServerName string `json:"server_name"`
}

type saslSettings struct {
	Enable    bool   `json:"enable"`
	Mechanism string `json:"mechanism"` // PLAIN, SCRAM-SHA-256, SCRAM-SHA-512, OAUTHBEARER
	User      string `json:"user"`
	Password  string `json:"password"`
	Token     string `json:"token"` // OAUTHBEARER: the compact JWS sent as is
}

func applySecurity(config *sarama.Config, sec *security) error {
	if sec == nil {
		return nil
	}
	if sec.TLS != nil && sec.TLS.Enable {
		tlsConfig, err := tlsConfigOf(sec.TLS)
		if err != nil {
			return err
		}
		config.Net.TLS.Enable = true
		config.Net.TLS.Config = tlsConfig
	}
	if s := sec.SASL; s != nil && s.Enable {
		config.Net.SASL.Enable = true
		config.Net.SASL.Handshake = true
		config.Net.SASL.Mechanism = sarama.SASLMechanism(s.Mechanism)
		config.Net.SASL.User = s.User
		config.Net.SASL.Password = s.Password
		switch s.Mechanism {
		case sarama.SASLTypeSCRAMSHA256:
			config.Net.SASL.SCRAMClientGeneratorFunc = func() sarama.SCRAMClient { return &scramClient{hash: sha256.New} }
		case sarama.SASLTypeSCRAMSHA512:
			config.Net.SASL.SCRAMClientGeneratorFunc = func() sarama.SCRAMClient { return &scramClient{hash: sha512.New} }
		case sarama.SASLTypeOAuth:
			config.Net.SASL.TokenProvider = tokenProvider(s.Token)
		}
	}
	return nil
}

func tlsConfigOf(t *tlsSettings) (*tls.Config, error) {
	config := &tls.Config{ServerName: t.ServerName}
	if t.CAFile != "" {
		pem, err := ioutil.ReadFile(t.CAFile)
		if err != nil {
			return nil, err
		}
		config.RootCAs = x509.NewCertPool()
		if !config.RootCAs.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("no certificate in %s", t.CAFile)
		}
	}
	if t.CertFile != "" {
		pair, err := tls.LoadX509KeyPair(t.CertFile, t.KeyFile)
		if err != nil {
			return nil, err
		}
		config.Certificates = []tls.Certificate{pair}
	}
	return config, nil
}

type tokenProvider string

func (t tokenProvider) Token() (*sarama.AccessToken, error) {
	return &sarama.AccessToken{Token: string(t)}, nil
}

// scramClient: the client side of SCRAM (RFC 5802) over one hash, as sarama's SCRAMClient interface steps it:
// Step("") gives the client-first message, the server-first challenge gives the client-final message, and the
// server-final challenge is checked (its signature proves the server knew the stored key) and ends the exchange.
type scramClient struct {
	hash                  func() hash.Hash
	user, password, authz string
	nonce                 string
	clientFirstBare       string
	serverSignature       []byte
	step                  int
	done                  bool
}

func (c *scramClient) Begin(user, password, authzID string) error {
	raw := make([]byte, 24)
	if _, err := rand.Read(raw); err != nil {
		return err
	}
	c.user, c.password, c.authz = user, password, authzID
	c.nonce = base64.RawStdEncoding.EncodeToString(raw)
	c.step, c.done = 0, false
	return nil
}

func (c *scramClient) Done() bool { return c.done }

func (c *scramClient) Step(challenge string) (string, error) {
	c.step++
	switch c.step {
	case 1:
		c.clientFirstBare = "n=" + saslName(c.user) + ",r=" + c.nonce
		header := "n,,"
		if c.authz != "" {
			header = "n,a=" + saslName(c.authz) + ","
		}
		return header + c.clientFirstBare, nil
	case 2:
		return c.clientFinal(challenge)
	case 3:
		return "", c.checkServerFinal(challenge)
	}
	return "", fmt.Errorf("SCRAM exchange already over")
}

func (c *scramClient) clientFinal(serverFirst string) (string, error) {
	fields := attributes(serverFirst)
	nonce, salt64, iterText := fields["r"], fields["s"], fields["i"]
	if !strings.HasPrefix(nonce, c.nonce) || len(nonce) == len(c.nonce) {
		return "", fmt.Errorf("SCRAM: the server's nonce %q does not extend ours", nonce)
	}
	salt, err := base64.StdEncoding.DecodeString(salt64)
	if err != nil {
		return "", fmt.Errorf("SCRAM: bad salt: %v", err)
	}
	iterations, err := strconv.Atoi(iterText)
	if err != nil || iterations < 1 {
		return "", fmt.Errorf("SCRAM: bad iteration count %q", iterText)
	}
	salted := c.hi([]byte(c.password), salt, iterations)
	clientKey := c.hmac(salted, []byte("Client Key"))
	storedKey := c.sum(clientKey)
	withoutProof := "c=biws,r=" + nonce // biws: base64 of the gs2 header "n,,"
	if c.authz != "" {
		withoutProof = "c=" + base64.StdEncoding.EncodeToString([]byte("n,a="+saslName(c.authz)+",")) + ",r=" + nonce
	}
	authMessage := []byte(c.clientFirstBare + "," + serverFirst + "," + withoutProof)
	signature := c.hmac(storedKey, authMessage)
	proof := make([]byte, len(clientKey))
	for i := range clientKey {
		proof[i] = clientKey[i] ^ signature[i]
	}
	c.serverSignature = c.hmac(c.hmac(salted, []byte("Server Key")), authMessage)
	return withoutProof + ",p=" + base64.StdEncoding.EncodeToString(proof), nil
}

func (c *scramClient) checkServerFinal(serverFinal string) error {
	fields := attributes(serverFinal)
	if e, failed := fields["e"]; failed {
		return fmt.Errorf("SCRAM: the server refused: %s", e)
	}
	got, err := base64.StdEncoding.DecodeString(fields["v"])
	if err != nil || subtle.ConstantTimeCompare(got, c.serverSignature) != 1 {
		return fmt.Errorf("SCRAM: the server's signature does not match")
	}
	c.done = true
	return nil
}

// hi: RFC 5802's Hi(), PBKDF2 with HMAC over c.hash and one block of output.
func (c *scramClient) hi(password, salt []byte, iterations int) []byte {
	u := c.hmac(password, append(append([]byte{}, salt...), 0, 0, 0, 1))
	out := append([]byte{}, u...)
	for i := 1; i < iterations; i++ {
		u = c.hmac(password, u)
		for j := range out {
			out[j] ^= u[j]
		}
	}
	return out
}

func (c *scramClient) hmac(key, data []byte) []byte {
	mac := hmac.New(c.hash, key)
	mac.Write(data)
	return mac.Sum(nil)
}

func (c *scramClient) sum(data []byte) []byte {
	h := c.hash()
	h.Write(data)
	return h.Sum(nil)
}

// attributes: a SCRAM message's comma-separated `k=value` pairs.
func attributes(message string) map[string]string {
	found := map[string]string{}
	for _, part := range strings.Split(message, ",") {
		if len(part) >= 2 && part[1] == '=' {
			found[part[:1]] = part[2:]
		}
	}
	return found
}

// saslName: a name with ',' and '=' escaped as RFC 5802 asks.
func saslName(name string) string {
	return strings.NewReplacer("=", "=3D", ",", "=2C").Replace(name)
}
