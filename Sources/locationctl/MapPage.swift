/// The HTML of `locationctl map`: Leaflet and Leaflet.markercluster inlined from their Debian
/// packages, the trip's data, and the few lines that draw it. No request leaves the page
/// unless a tile server is given.
enum MapPage {
    /// The library files, read once.
    struct Assets {
        var leafletJS: String, leafletCSS: String, clusterJS: String, clusterCSS: String, clusterDefaultCSS: String

        init(directory: String) throws {
            func read(_ name: String) throws -> String {
                let path = directory + "/" + name
                guard let text = readTextFile(path) else {
                    throw RuntimeError("\(path): cannot read it; install libjs-leaflet and libjs-leaflet.markercluster (apt-get install libjs-leaflet libjs-leaflet.markercluster) or give their directory with --leaflet DIR")
                }
                return text
            }
            leafletJS = try read("leaflet.js")
            leafletCSS = try read("leaflet.css")
            clusterJS = try read("leaflet.markercluster.js")
            clusterCSS = try read("MarkerCluster.css")
            clusterDefaultCSS = try read("MarkerCluster.Default.css")
        }
    }

    static func html(title: String, data: String, assets: Assets) -> String {
        """
        <!DOCTYPE html>
        <html lang="en"><head><meta charset="utf-8">
        <meta name="viewport" content="width=device-width, initial-scale=1">
        <title>\(escape(title)) — locationd map</title>
        <style>\(assets.leafletCSS)</style>
        <style>\(assets.clusterCSS)</style>
        <style>\(assets.clusterDefaultCSS)</style>
        <style>
        html, body, #map { height: 100%; margin: 0; }
        #map { background: #f5f4f0; }
        .visit-icon { background: #1565c0; border: 2px solid #fff; border-radius: 50%; box-shadow: 0 0 3px rgba(0,0,0,.6); }
        #legend { position: absolute; z-index: 1000; top: 10px; right: 10px; background: rgba(255,255,255,.92);
                  padding: 6px 10px; font: 12px/1.5 sans-serif; border-radius: 4px; box-shadow: 0 1px 4px rgba(0,0,0,.3); }
        #legend i { display: inline-block; width: 18px; height: 4px; margin-right: 6px; vertical-align: middle; }
        #errors { position: absolute; z-index: 2000; bottom: 30px; left: 10px; right: 10px; background: #ffebee;
                  color: #b71c1c; padding: 8px; font: 13px monospace; }
        </style>
        <script>
        // A script error is shown on the page (and found there by tests).
        window.addEventListener('error', function (e) {
          var box = document.getElementById('errors');
          if (!box) { box = document.createElement('div'); box.id = 'errors'; document.body.appendChild(box); }
          box.textContent += 'map error: ' + e.message + ' ';
        });
        </script>
        </head><body>
        <div id="map"></div>
        <div id="legend"><b>\(escape(title))</b><br>
        <i style="background:#2e7d32"></i>accuracy ≤ 10 m<br><i style="background:#f9a825"></i>≤ 30 m<br>
        <i style="background:#c62828"></i>&gt; 30 m<br><i style="background:#757575"></i>unknown<br>
        <i style="background:#e65100;height:10px;width:10px;border-radius:50%"></i>place (size: visits)<br>
        <i style="border:2px solid #d50000;height:6px;width:6px;border-radius:50%"></i>rejected outlier<br>
        <span id="summary"></span></div>
        <script>\(assets.leafletJS)</script>
        <script>\(assets.clusterJS)</script>
        <script>const DATA = \(data);</script>
        <script>
        (function () {
          var map = L.map('map', { preferCanvas: true, minZoom: 1, maxZoom: 19 });
          if (DATA.tiles) L.tileLayer(DATA.tiles, { maxZoom: 19 }).addTo(map);
          L.control.scale({ imperial: false }).addTo(map);
          var colours = { good: '#2e7d32', fair: '#f9a825', poor: '#c62828', unknown: '#757575' };
          var bounds = L.latLngBounds([]);
          DATA.track.forEach(function (s) {
            var line = L.polyline(s.points, { color: colours[s.accuracy], weight: 3, opacity: 0.85, interactive: false }).addTo(map);
            bounds.extend(line.getBounds());
          });
          DATA.regions.forEach(function (r) {
            var inside = r.state === 'inside';
            L.circle([r.lat, r.lon], { radius: r.radius, color: inside ? '#6a1b9a' : '#546e7a', weight: 2,
                                       fillOpacity: inside ? 0.3 : 0.08 })
              .bindTooltip(r.id + ': ' + r.state).addTo(map);
            var dLat = r.radius / 111195, dLon = dLat / Math.max(0.01, Math.cos(r.lat * Math.PI / 180));
            bounds.extend([[r.lat - dLat, r.lon - dLon], [r.lat + dLat, r.lon + dLon]]);
          });
          // Fixes the outlier gate rejected: rings over the track, with their time.
          DATA.outliers.forEach(function (o) {
            L.circleMarker([o.lat, o.lon], { radius: 4, color: '#d50000', weight: 2, fillColor: '#fff', fillOpacity: 1 })
              .bindTooltip('rejected outlier, ' + o.time).addTo(map);
            bounds.extend([o.lat, o.lon]);
          });
          // Places under the visits, sized by how often they were visited.
          DATA.places.forEach(function (p) {
            L.circleMarker([p.lat, p.lon], { radius: 8 + 4 * Math.sqrt(p.visits), color: '#e65100', weight: 2, fillOpacity: 0.25 })
              .bindTooltip(p.label).addTo(map);
            bounds.extend([p.lat, p.lon]);
          });
          // supercluster's defaults: 40 px radius, no clustering past zoom 16.
          var visits = L.markerClusterGroup({ maxClusterRadius: 40, disableClusteringAtZoom: 17 });
          DATA.visits.forEach(function (v) {
            visits.addLayer(L.marker([v.lat, v.lon], { icon: L.divIcon({ className: 'visit-icon', iconSize: [14, 14] }), title: v.label })
              .bindPopup(v.label));
            bounds.extend([v.lat, v.lon]);
          });
          map.addLayer(visits);
          if (bounds.isValid()) map.fitBounds(bounds, { padding: [30, 30], maxZoom: 17 }); else map.setView([0, 0], 2);
          document.getElementById('summary').textContent =
            DATA.fixes + ' fixes, ' + DATA.visits.length + ' visits, ' + DATA.places.length + ' places' + (DATA.regions.length ? ', ' + DATA.regions.length + ' regions' : '') +
            ', ' + DATA.outliers.length + ' outliers rejected';
          // Without tiles, a latitude/longitude grid of 4–10 lines a side.
          if (DATA.tiles) return;
          var grid = L.layerGroup().addTo(map);
          var steps = [30, 10, 5, 2, 1, 0.5, 0.2, 0.1, 0.05, 0.02, 0.01, 0.005, 0.002, 0.001, 0.0005, 0.0002, 0.0001];
          function drawGrid() {
            grid.clearLayers();
            var b = map.getBounds(), south = Math.max(-85, b.getSouth()), north = Math.min(85, b.getNorth());
            var span = Math.max(north - south, b.getEast() - b.getWest());
            var step = steps.find(function (s) { return span / s >= 4; }) || steps[steps.length - 1];
            var style = { color: '#c8c8c8', weight: 1, interactive: false };
            for (var i = Math.ceil(south / step); i * step <= north; i++)
              grid.addLayer(L.polyline([[i * step, b.getWest()], [i * step, b.getEast()]], style));
            for (var j = Math.ceil(b.getWest() / step); j * step <= b.getEast(); j++)
              grid.addLayer(L.polyline([[south, j * step], [north, j * step]], style));
          }
          map.on('moveend', drawGrid);
          drawGrid();
        })();
        </script>
        </body></html>

        """
    }

    static func escape(_ s: String) -> String {
        var out = ""
        for c in s {
            switch c {
            case "<": out += "&lt;"
            case ">": out += "&gt;"
            case "&": out += "&amp;"
            case "\"": out += "&quot;"
            default: out.append(c)
            }
        }
        return out
    }
}
