// Conclave's /docs: Swagger UI on the gateway's own OpenAPI document, served from the
// gateway itself (no CDN: the page works offline and under a CSP of 'self').
window.onload = function () {
  window.ui = SwaggerUIBundle({
    url: "/openapi.json",
    dom_id: "#swagger-ui",
    deepLinking: true,
    presets: [SwaggerUIBundle.presets.apis],
    layout: "BaseLayout",
  });
};
