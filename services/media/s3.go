package media

import (
	"bytes"
	"context"
	"fmt"
	"net/url"
	"strings"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
)

// S3Config is an S3-compatible bucket (NEWSLETTER_MEDIA_S3_*).
type S3Config struct {
	// Endpoint is the service's URL: https://s3.eu-west-1.amazonaws.com,
	// http://minio:9000 (http only for a private network).
	Endpoint, Bucket, AccessKey, SecretKey, Region string
	// PublicURL is where readers fetch the bucket's objects
	// (a CDN, or the bucket's own address), without the name.
	PublicURL string
}

// S3 stores images as objects of a bucket, each public to read through
// PublicURL (the bucket's policy or CDN is the operator's to set).
type S3 struct {
	client    *minio.Client
	bucket    string
	publicURL string
}

// NewS3 is an S3 store of c; it checks the endpoint's form, not the
// bucket (the first upload does).
func NewS3(c S3Config) (*S3, error) {
	u, err := url.Parse(c.Endpoint)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
		return nil, fmt.Errorf("media: S3 endpoint %q: an http(s) URL, e.g. https://s3.eu-west-1.amazonaws.com", c.Endpoint)
	}
	if c.Bucket == "" || c.PublicURL == "" {
		return nil, fmt.Errorf("media: an S3 bucket needs its name and its public URL")
	}
	cl, err := minio.New(u.Host, &minio.Options{Creds: credentials.NewStaticV4(c.AccessKey, c.SecretKey, ""),
		Secure: u.Scheme == "https", Region: c.Region, BucketLookup: minio.BucketLookupPath})
	if err != nil {
		return nil, fmt.Errorf("media: S3 client: %w", err)
	}
	return &S3{client: cl, bucket: c.Bucket, publicURL: strings.TrimRight(c.PublicURL, "/")}, nil
}

// Put implements Store: the object with its type and a year's cache
// (the name is the content's hash, so it never changes).
func (s *S3) Put(ctx context.Context, name, contentType string, data []byte) error {
	_, err := s.client.PutObject(ctx, s.bucket, name, bytes.NewReader(data), int64(len(data)), minio.PutObjectOptions{
		ContentType: contentType, CacheControl: CacheControl})
	return err
}

// URL implements Store.
func (s *S3) URL(name string) string { return s.publicURL + "/" + name }

// CacheControl is how long readers and caches keep an image: a year,
// as its name changes with its content.
const CacheControl = "public, max-age=31536000, immutable"
