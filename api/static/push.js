// "Also notify this browser" on the preference centre and the page after
// confirming. The offer is hidden in the HTML and shown here only where
// the browser has service workers and the Push API: without JavaScript,
// or without push, the page is the same form as ever.
'use strict';

(() => {
  const box = document.getElementById('push');
  if (!box || !('serviceWorker' in navigator) || !('PushManager' in window) || !('Notification' in window)) {
    return;
  }
  const button = box.querySelector('button');
  const status = box.querySelector('[role=status]');
  const say = (text) => { status.textContent = text; };

  // The VAPID public key (base64url) as the bytes applicationServerKey takes.
  const keyBytes = (b64) => {
    const s = b64.replace(/-/g, '+').replace(/_/g, '/') + '==='.slice((b64.length + 3) % 4);
    return Uint8Array.from(atob(s), (c) => c.charCodeAt(0));
  };
  const sameKey = (sub, key) => {
    const k = sub.options && sub.options.applicationServerKey;
    if (!k) return false;
    const a = new Uint8Array(k);
    return a.length === key.length && a.every((v, i) => v === key[i]);
  };

  box.hidden = false;
  if (Notification.permission === 'denied') {
    button.disabled = true;
    say('Notifications from this site are blocked in your browser settings.');
    return;
  }
  button.addEventListener('click', async () => {
    button.disabled = true;
    say('Asking your browser…');
    try {
      const key = keyBytes(box.dataset.key);
      const reg = await navigator.serviceWorker.register('/sw.js');
      await navigator.serviceWorker.ready;
      let sub = await reg.pushManager.getSubscription();
      if (sub && !sameKey(sub, key)) {
        // Made for another key (the operator changed it): start over.
        await sub.unsubscribe();
        sub = null;
      }
      if (!sub) {
        sub = await reg.pushManager.subscribe({ userVisibleOnly: true, applicationServerKey: key });
      }
      const resp = await fetch('/preferences/push', {
        method: 'POST',
        headers: { 'Content-Type': 'application/json', Accept: 'application/json' },
        body: JSON.stringify({ token: box.dataset.token, subscription: sub.toJSON() }),
      });
      if (resp.status !== 201) {
        const answer = await resp.json().catch(() => ({}));
        throw new Error(answer.error || resp.statusText);
      }
      say('Done: this browser will show a notification when something new comes out.');
    } catch (err) {
      button.disabled = false;
      say('Notifications could not be turned on: ' + err.message);
    }
  });
})();
