// The newsletter's service worker: it shows each web push message (JSON
// {title, body, url}, decrypted by the browser) as a notification, and a
// click opens the message's link.
'use strict';

self.addEventListener('push', (event) => {
  let n = {};
  if (event.data) {
    try {
      n = event.data.json();
    } catch (e) {
      n = { title: event.data.text() };
    }
  }
  const url = typeof n.url === 'string' && /^https?:\/\//.test(n.url) ? n.url : '';
  event.waitUntil(self.registration.showNotification(n.title || 'Newsletter', {
    body: n.body || '',
    data: { url },
  }));
});

self.addEventListener('notificationclick', (event) => {
  event.notification.close();
  const url = event.notification.data && event.notification.data.url;
  if (url) {
    event.waitUntil(self.clients.openWindow(url));
  }
});
