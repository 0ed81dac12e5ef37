package pki

import (
	"crypto/x509"
	"crypto/x509/pkix"
	"fmt"
	"os"
	"path/filepath"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/draplane/draplane/internal/auth/rbac"
)

// ClientKubeconfig is what MintClientKubeconfig writes: a kubeconfig whose
// client certificate the data dir's CA signed for User and Groups.
type ClientKubeconfig struct {
	DataDir   string
	ServerURL string
	User      string
	Groups    []string
	// Path is the kubeconfig written.
	Path string
}

// NodeKubeconfig is the kubeconfig of a node's identity: user
// draplane:node:<node> in group draplane:nodes and draplane:driver:<driver>
// for each driver, which auth/node restricts to the node's objects.
func NodeKubeconfig(dataDir, nodeName string, drivers []string, path string) ClientKubeconfig {
	return ClientKubeconfig{DataDir: dataDir, User: rbac.NodeUserPrefix + nodeName, Groups: rbac.NodeGroups(drivers...), Path: path}
}

// MintClientKubeconfig signs a client certificate for a user and its
// groups (CommonName and Organizations, as Kubernetes reads them) with the
// data dir's CA, which standalone servers trust, and writes a kubeconfig
// with it. The CA must exist: a server has started on the data dir.
func MintClientKubeconfig(k ClientKubeconfig) error {
	if k.User == "" {
		return fmt.Errorf("a user name is required")
	}
	for _, group := range k.Groups {
		if group == AdminGroup {
			return fmt.Errorf("group %s is the admin group; use %s", AdminGroup, filepath.Join(k.DataDir, AdminKubeconfigName))
		}
	}
	dir := pkiDir(k.DataDir)
	if _, err := os.Stat(filepath.Join(dir, "ca.key")); err != nil {
		return fmt.Errorf("no CA in data dir %s (start dra-apiserver on it once): %w", k.DataDir, err)
	}
	ca, err := loadOrCreatePKI(dir)
	if err != nil {
		return err
	}
	serverURL := k.ServerURL
	if serverURL == "" {
		admin, err := clientcmd.LoadFromFile(filepath.Join(k.DataDir, AdminKubeconfigName))
		if err != nil {
			return fmt.Errorf("no --server given and no admin kubeconfig to take it from: %w", err)
		}
		for _, cluster := range admin.Clusters {
			serverURL = cluster.Server
		}
	}
	tmp, err := os.MkdirTemp("", "draplane-client-cert")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	certFile, keyFile := filepath.Join(tmp, "client.crt"), filepath.Join(tmp, "client.key")
	template := &x509.Certificate{
		Subject:     pkix.Name{CommonName: k.User, Organization: k.Groups},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	if err := ca.signLeaf(template, certFile, keyFile); err != nil {
		return fmt.Errorf("client certificate for %s: %w", k.User, err)
	}
	certPEM, err := os.ReadFile(certFile)
	if err != nil {
		return err
	}
	keyPEM, err := os.ReadFile(keyFile)
	if err != nil {
		return err
	}
	const name = "draplane"
	config := clientcmdapi.NewConfig()
	config.Clusters[name] = &clientcmdapi.Cluster{Server: serverURL, CertificateAuthorityData: ca.caPEM}
	config.AuthInfos[k.User] = &clientcmdapi.AuthInfo{ClientCertificateData: certPEM, ClientKeyData: keyPEM}
	config.Contexts[name] = &clientcmdapi.Context{Cluster: name, AuthInfo: k.User, Namespace: "default"}
	config.CurrentContext = name
	data, err := clientcmd.Write(*config)
	if err != nil {
		return fmt.Errorf("encode kubeconfig: %w", err)
	}
	return writeFileAtomic(k.Path, data, 0o600)
}
