// Refresh the page's <main> in place every data-refresh seconds: fetch the same URL, swap
// the content. Paused while a confirmation dialog or a form is in use.
(function () {
  const seconds = Number(document.body.dataset.refresh || 0);
  if (!seconds) return;
  setInterval(async function () {
    if (document.activeElement && document.activeElement.form) return;
    try {
      const response = await fetch(window.location.href, {headers: {"X-Refresh": "1"}});
      if (!response.ok || response.redirected) return;  // the session ended: leave the page as it is
      const page = new DOMParser().parseFromString(await response.text(), "text/html");
      const fresh = page.querySelector("main");
      if (fresh) document.querySelector("main").replaceWith(fresh);
      document.body.dataset.refreshed = String(Date.now());
    } catch (e) { /* the broker or the console is away: try again next time */ }
  }, seconds * 1000);
})();
