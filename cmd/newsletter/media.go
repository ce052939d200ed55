package main

import (
	"github.com/newsletter/newsletter/services/media"
)

// mediaService is where the API and the console keep the images
// uploaded into issues: the bucket when NEWSLETTER_MEDIA_S3_ENDPOINT is
// set, else the folder NEWSLETTER_MEDIA_DIR, served at
// NEWSLETTER_BASE_URL/media/.
func (a *app) mediaService() (*media.Service, error) {
	m := a.cfg.Media
	if m.S3Endpoint == "" {
		return media.New(&media.Dir{Path: m.Dir, Base: a.cfg.BaseURL}), nil
	}
	st, err := media.NewS3(media.S3Config{Endpoint: m.S3Endpoint, Bucket: m.S3Bucket, Region: m.S3Region,
		AccessKey: m.S3AccessKey, SecretKey: m.S3SecretKey, PublicURL: m.S3PublicURL})
	if err != nil {
		return nil, err
	}
	return media.New(st), nil
}
