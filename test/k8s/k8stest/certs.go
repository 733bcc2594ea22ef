package k8stest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// pki holds the files of one cluster's certificates, all under one directory.
type pki struct {
	CA, ServingCert, ServingKey string
	AdminCert, AdminKey         string
	ProxyCert, ProxyKey         string
	SAPublic, SAPrivate         string

	// Admin credentials as PEM, for the in-process client.
	caPEM, adminCertPEM, adminKeyPEM []byte
}

type keyPair struct {
	cert    *x509.Certificate
	key     *ecdsa.PrivateKey
	certPEM []byte
	keyPEM  []byte
}

// newPKI writes a CA, the apiserver's serving certificate (SANs 127.0.0.1,
// the advertise address and the first service address), an admin client
// certificate in system:masters, kube-proxy's client certificate and the
// service-account key pair into dir.
func newPKI(dir string, advertise, firstServiceIP net.IP) (*pki, error) {
	ca, err := newKeyPair(&x509.Certificate{
		Subject:               pkix.Name{CommonName: "hapsuper-test-ca"},
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}, nil)
	if err != nil {
		return nil, err
	}
	serving, err := newKeyPair(&x509.Certificate{
		Subject:     pkix.Name{CommonName: "kube-apiserver"},
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1), advertise, firstServiceIP},
		DNSNames:    []string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc", "kubernetes.default.svc.cluster.local"},
	}, ca)
	if err != nil {
		return nil, err
	}
	admin, err := newKeyPair(clientTemplate("hapsuper-test-admin", "system:masters"), ca)
	if err != nil {
		return nil, err
	}
	proxy, err := newKeyPair(clientTemplate("system:kube-proxy"), ca)
	if err != nil {
		return nil, err
	}
	sa, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("generate service-account key: %w", err)
	}
	saPub, err := x509.MarshalPKIXPublicKey(&sa.PublicKey)
	if err != nil {
		return nil, fmt.Errorf("encode service-account public key: %w", err)
	}
	saPriv, err := x509.MarshalECPrivateKey(sa)
	if err != nil {
		return nil, fmt.Errorf("encode service-account private key: %w", err)
	}

	p := &pki{caPEM: ca.certPEM, adminCertPEM: admin.certPEM, adminKeyPEM: admin.keyPEM}
	for _, f := range []struct {
		path *string
		name string
		data []byte
	}{
		{&p.CA, "ca.crt", ca.certPEM},
		{&p.ServingCert, "apiserver.crt", serving.certPEM},
		{&p.ServingKey, "apiserver.key", serving.keyPEM},
		{&p.AdminCert, "admin.crt", admin.certPEM},
		{&p.AdminKey, "admin.key", admin.keyPEM},
		{&p.ProxyCert, "kube-proxy.crt", proxy.certPEM},
		{&p.ProxyKey, "kube-proxy.key", proxy.keyPEM},
		{&p.SAPublic, "sa.pub", pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: saPub})},
		{&p.SAPrivate, "sa.key", pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: saPriv})},
	} {
		*f.path = filepath.Join(dir, f.name)
		if err := os.WriteFile(*f.path, f.data, 0o600); err != nil {
			return nil, fmt.Errorf("write %s: %w", *f.path, err)
		}
	}
	return p, nil
}

func clientTemplate(cn string, groups ...string) *x509.Certificate {
	return &x509.Certificate{
		Subject:     pkix.Name{CommonName: cn, Organization: groups},
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
}

// newKeyPair signs tmpl with parent, or self-signs it when parent is nil.
func newKeyPair(tmpl *x509.Certificate, parent *keyPair) (*keyPair, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("generate key for %s: %w", tmpl.Subject.CommonName, err)
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		return nil, fmt.Errorf("draw serial for %s: %w", tmpl.Subject.CommonName, err)
	}
	tmpl.SerialNumber = serial
	tmpl.NotBefore = time.Now().Add(-time.Hour)
	tmpl.NotAfter = time.Now().Add(48 * time.Hour)
	signer, signerCert := key, tmpl
	if parent != nil {
		signer, signerCert = parent.key, parent.cert
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, signerCert, &key.PublicKey, signer)
	if err != nil {
		return nil, fmt.Errorf("sign certificate for %s: %w", tmpl.Subject.CommonName, err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, fmt.Errorf("parse certificate for %s: %w", tmpl.Subject.CommonName, err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, fmt.Errorf("encode key for %s: %w", tmpl.Subject.CommonName, err)
	}
	return &keyPair{
		cert:    cert,
		key:     key,
		certPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		keyPEM:  pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}),
	}, nil
}

// writeKubeconfig writes a kubeconfig for server using the CA and a client
// certificate given as file paths.
func writeKubeconfig(path, server, ca, cert, key string) error {
	const tmpl = `apiVersion: v1
kind: Config
clusters:
- name: hapsuper-test
  cluster:
    server: %s
    certificate-authority: %s
users:
- name: user
  user:
    client-certificate: %s
    client-key: %s
contexts:
- name: hapsuper-test
  context:
    cluster: hapsuper-test
    user: user
current-context: hapsuper-test
`
	if err := os.WriteFile(path, fmt.Appendf(nil, tmpl, server, ca, cert, key), 0o600); err != nil {
		return fmt.Errorf("write kubeconfig %s: %w", path, err)
	}
	return nil
}
